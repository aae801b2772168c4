"""The append-only ledger of this checkout (`ledger.jsonl`), its closed vocabulary, and rotation.

Stdlib only: the hook path appends here.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

from majordomus import __version__
from majordomus.errors import ContractError, RefusedError
from majordomus.identity import compact_stamp, now_s, now_utc, rfc3339
from majordomus.layout import Layout, append_line, file_lock, sweep_stale_temps, write_atomic

if TYPE_CHECKING:
    from datetime import datetime
    from pathlib import Path
    from typing import Any

# The closed vocabulary: event name -> the payload keys it requires. An unknown name is refused.
EVENTS: dict[str, tuple[str, ...]] = {
    "session.started": ("provider", "provider_session"),
    "session.closed": ("outcome", "reason", "session_path"),
    "session.compacted": ("provider", "compactions"),
    "session.recovered": ("outcome", "reason"),
    "provider.event.failed": ("provider", "provider_event", "reason"),
    "prompts.reconciled": ("records", "linked", "unlinked", "refused"),
    "prompts.pruned": ("records", "pruned", "bytes_left"),
    "ledger.rotated": ("archived", "kept", "archive"),
}


def append(layout: Layout, event: str, *, session: str | None = None, head: str | None = None,
           branch: str | None = None, at: datetime | float | None = None, **payload: Any) -> None:
    required = EVENTS.get(event)
    if required is None:
        raise ContractError(f"ledger event '{event}' is not in the vocabulary", "use one of " + ", ".join(EVENTS))
    missing = [k for k in required if k not in payload]
    if missing:
        raise ContractError(f"ledger event '{event}' needs {', '.join(missing)}")
    line: dict[str, Any] = {"ts": rfc3339(now_s() if at is None else at), "event": event, "head": head,
                            "branch": branch, "by": f"majordomus/{__version__}"}
    if session:
        line["session"] = session
    line.update(payload)
    text = json.dumps(line, ensure_ascii=False, separators=(",", ":"))
    with file_lock(_lock(layout), shared=True):  # appenders share; only a rotation waits for them all
        append_line(layout.ledger_file, text)


def _lock(layout: Layout) -> Path:
    return layout.locks / "ledger.lock"


def read(layout: Layout) -> list[dict[str, Any]]:
    """Every parseable line; a torn or foreign line is skipped, never fatal."""
    try:
        raw = layout.ledger_file.read_bytes()
    except FileNotFoundError:
        return []
    import json

    out: list[dict[str, Any]] = []
    for chunk in raw.splitlines():
        try:
            item = json.loads(chunk)
        except ValueError:
            continue
        if isinstance(item, dict):
            out.append(item)
    return out


def has_event(layout: Layout, event: str, session: str) -> bool:
    """Whether a line of `event` names `session`, in the ledger or else in one of its rotated archives. Only the
    lines that mention the session are parsed (a byte search): a start that keeps an open episode asks this."""
    needle = ('"session":' + json.dumps(session, ensure_ascii=False)).encode("utf-8")
    if _names(str(layout.ledger_file), needle, event, session):
        return True
    try:  # the archives only when the ledger has no such line: a rotation is rare
        archived = sorted((n for n in os.listdir(layout.state) if n.startswith("ledger.")
                           and n.endswith(".jsonl.archived")), reverse=True)
    except OSError:
        return False
    return any(_names(os.path.join(layout.state, name), needle, event, session) for name in archived)


def _names(path: str, needle: bytes, event: str, session: str) -> bool:
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError:
        return False
    at = raw.find(needle)
    while at >= 0:
        end = raw.find(b"\n", at)
        line = raw[raw.rfind(b"\n", 0, at) + 1:end if end >= 0 else len(raw)]
        try:
            item = json.loads(line.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            item = None
        if isinstance(item, dict) and item.get("event") == event and item.get("session") == session:
            return True
        at = raw.find(needle, at + len(needle))
    return False


def rotate(layout: Layout, keep: int) -> str:
    """Move all but the newest `keep` lines into an archived file; never delete, never overwrite."""
    with file_lock(_lock(layout)):  # excludes every appender while the file is rewritten
        try:
            lines = layout.ledger_file.read_bytes().splitlines(keepends=True)
        except FileNotFoundError:
            return "history: no ledger here yet; nothing to rotate"
        if len(lines) <= keep:
            return f"history: {len(lines)} line(s), within the {keep} kept; nothing to rotate"
        moment = now_utc()
        archive = layout.state / f"ledger.{compact_stamp(moment)}.jsonl.archived"
        if archive.exists():
            raise RefusedError(f"{archive.name} exists already; rotation never overwrites an archive",
                               "wait a second and run majordomus history --rotate again")
        old, new = lines[: len(lines) - keep], lines[len(lines) - keep:]
        write_atomic(archive, b"".join(old))  # first: a kill before the rewrite leaves lines twice, never nowhere
        write_atomic(layout.ledger_file, b"".join(new))
        sweep_stale_temps(layout.state)  # what a killed rotation left: under the lock, no rotation is writing
    append(layout, "ledger.rotated", archived=len(old), kept=len(new),
           archive=str(archive.relative_to(layout.root)))
    return f"history: {len(old)} line(s) moved to {archive.relative_to(layout.root)}; {len(new)} kept"

