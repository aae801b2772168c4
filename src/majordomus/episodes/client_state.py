"""A client's own file about one of its sessions (providers.yaml `state_file`), read where its hooks say too little.

Cline 3.0.65 runs no end hook when a person leaves its terminal UI or a headless run finishes, and its TaskStart
payload carries no message; its session file says both: the task's first message, and how the session ended.
Every reader here is bounded and fails closed (None: nothing is claimed). Stdlib only: hooks run it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

    from majordomus.clients.providers import StateFileRow
    from majordomus.episodes.store import OpenFile

FILE_LIMIT = 256 * 1024  # a session file is ~2 KiB; past this it is not one
MESSAGES_LIMIT = 64 * 1024  # a messages file without a message is ~300 bytes; a longer one holds some
SESSION_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.")


def _safe(session: str) -> bool:
    """A provider session that names one folder: never a separator, `..` or a hidden name."""
    return bool(session) and len(session) <= 128 and not session.startswith(".") and set(session) <= SESSION_SAFE


def state_path(row: StateFileRow, session: str) -> str | None:
    """The first declared path that exists for this session; None when none does (or the session names no folder)."""
    if not _safe(session):
        return None
    for pattern in row.paths:
        head, sep, rest = pattern.partition("/")
        if head == "~":
            base = os.environ.get("HOME", "")
        elif head.startswith("$"):
            base = os.environ.get(head[1:], "").strip()  # a variable that is not set names no place
        else:
            continue
        if not base or not sep:
            continue
        path = os.path.join(base, rest.replace("{session}", session))
        if os.path.isfile(path):
            return path
    return None


def _read_json(path: str, limit: int) -> Any:
    try:
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    except OSError:
        return None
    if len(data) > limit:
        return None
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None


def read_state(row: StateFileRow, session: str) -> dict[str, Any] | None:
    path = state_path(row, session)
    found = _read_json(path, FILE_LIMIT) if path is not None else None
    return found if isinstance(found, dict) else None


def unwrap(text: str, tag: str | None) -> str:
    """`<tag …>text</tag>` → `text`: the wrapper Cline puts around a message typed in its terminal UI."""
    if not tag:
        return text
    stripped = text.strip()
    close = f"</{tag}>"
    if stripped.startswith(f"<{tag}") and stripped.endswith(close) and ">" in stripped:
        opening = stripped.index(">") + 1
        if opening <= len(stripped) - len(close):
            return stripped[opening:-len(close)]
    return text


OWN_RUN_SECONDS = 5  # Cline adds a run's first message milliseconds before it dispatches the run's start hook


def first_prompt(row: StateFileRow, session: str, dispatched: str | None) -> str | None:
    """The task's first message, when the file says it is this task's: its messages file holds no message of the
    person's yet (Cline writes a run's messages only when it ends, so at a later run's start it holds the earlier
    runs'), or only this one, stamped within seconds of `dispatched` (the start payload's time): a run that ended
    before its start hook read the file."""
    state = read_state(row, session) if row.prompt_key and row.messages_key else None
    if state is None:
        return None
    text = state.get(str(row.prompt_key))
    messages_path = state.get(str(row.messages_key))
    if not isinstance(text, str) or not text.strip() or not isinstance(messages_path, str):
        return None
    text = unwrap(text, row.prompt_tag)
    if os.path.exists(messages_path):  # absent: nothing written yet, as at a headless run's start
        found = _read_json(messages_path, MESSAGES_LIMIT)
        messages = found.get("messages") if isinstance(found, dict) else None
        if not isinstance(messages, list):
            return None  # a file that cannot say (or too long to hold only this run's)
        persons = [m for m in messages if not isinstance(m, dict) or m.get("role") == "user"]
        if persons and not (len(persons) == 1 and _is_this_run(persons[0], text, row.prompt_tag, dispatched)):
            return None  # an earlier task's messages: the file's prompt is that task's
    return text if text.strip() else None


def _is_this_run(message: Any, text: str, tag: str | None, dispatched: str | None) -> bool:
    from majordomus.identity import epoch_of

    if not isinstance(message, dict) or not isinstance(message.get("ts"), int) or not isinstance(dispatched, str):
        return False
    parts = message.get("content")
    said = "".join(p.get("text", "") for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)) \
        if isinstance(parts, list) else ""
    when = epoch_of(dispatched[:19] + "Z") if len(dispatched) >= 20 and dispatched.endswith("Z") else None
    return (unwrap(said, tag).strip() == text.strip() and when is not None
            and abs(message["ts"] / 1000 - when) <= OWN_RUN_SECONDS)


def first_id(session: str) -> str:
    """The prompt id of a session's first message, whichever hook archives it."""
    return f"{session}#first"


def id_if_first(row: StateFileRow, session: str, text: str) -> str | None:
    """The first message's id when `text` is the session's first message as the file holds it, else None."""
    if not row.prompt_key:
        return None
    state = read_state(row, session)
    found = state.get(row.prompt_key) if state is not None else None
    if isinstance(found, str) and unwrap(found, row.prompt_tag).strip() == text.strip():
        return first_id(session)
    return None


@dataclass(frozen=True)
class OrderlyEnd:
    status: str  # the client's own word, the record's end reason
    sentence: str  # what showed it, for the record's end evidence


def orderly_end(row: StateFileRow, opened: OpenFile) -> OrderlyEnd | None:
    """Whether the client's file says it ended this episode's session itself, after the episode opened, in the
    episode's own client process; None unless every part says so (a missing or unreadable file says nothing)."""
    if not (row.status_key and row.ended_key and row.pid_key) or opened.provider_session is None:
        return None
    if opened.last_turn == "running" or not opened.client or not opened.started_at:
        return None  # a turn that never finished was cut short, whatever the file says
    state = read_state(row, opened.provider_session)
    if state is None:
        return None
    status, ended, pid = state.get(row.status_key), state.get(row.ended_key), state.get(row.pid_key)
    if not isinstance(status, str) or status not in row.orderly:
        return None
    code = state.get(row.exit_code_key) if row.exit_code_key else 0
    if code != 0 or isinstance(code, bool):
        return None
    # both UTC: the file's ISO 8601 to the millisecond, ours to the second; an end stamped before the episode
    # opened is an earlier sitting's
    if not (isinstance(ended, str) and ended.endswith("Z") and len(ended) >= 20 and opened.started_at.endswith("Z")
            and ended[:19] >= opened.started_at[:19]):
        return None
    # the process that started the session (Cline keeps it when `cline --id` resumes one): only then is the file's
    # end this process's
    if not isinstance(pid, int) or isinstance(pid, bool) or str(pid) != opened.client.partition("@")[0]:
        return None
    code_part = f", {row.exit_code_key} 0" if row.exit_code_key else ""
    return OrderlyEnd(status, f"its session file says {row.status_key} {status}{code_part}, {row.ended_key} "
                              f"{ended[:19]}Z, {row.pid_key} {pid}")
