"""`capture prompt`: one prompt — filter, redact, resolve its episode strictly, write the record and renderings.

Stdlib only, and nothing heavy: this runs inside a person's prompt hook, before the model sees the prompt.
A malformed payload never stops the person: it becomes a line of key names in `.capture.log`, exit 0.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from majordomus.archive import record as rec
from majordomus.archive.render import write_renderings
from majordomus.clients.payload import ABSENT, Malformed, field, first_scalar, json_kind, parse_payload
from majordomus.clients.providers import get_provider
from majordomus.episodes import store
from majordomus.errors import InternalError, MajordomusError, MissingError
from majordomus.identity import (
    day_stamp,
    head_state,
    now_s,
    repository_id,
    rfc3339,
    second_stamp,
    sha256,
    worktree_id,
)
from majordomus.layout import Layout, append_line, create_first, ensure_dir, file_lock

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path
    from typing import Any

    from majordomus.clients.providers import PromptRow


# Openings of messages a client injects into the prompt stream on the person's behalf (REFERENCE 5.1).
INJECTED_MARKERS = (
    "<task-notification>", "<system-reminder>", "<subagent-notification>", "<cross-session-message>",
    "<hook-message>", "<user-prompt-submit-hook>", "<command-message>", "<command-name>", "<command-args>",
    "<local-command-stdout>", "<local-command-stderr>", "<bash-input>", "<bash-stdout>", "<bash-stderr>",
    "<ide_selection>", "<ide_opened_file>", "<ide_diagnostics>",
)


@dataclass(frozen=True)
class CaptureReport:
    exit_code: int
    line: str


def _keys(data: dict[str, Any]) -> str:
    """The payload's key names for the log: capped, and redacted too (a key can be anything a client sends)."""
    from majordomus.redact import redact

    # redacted whole before it is cut (a cut credential no longer matches its shape), then escaped (a key
    # holding a line feed must not break the log line) and capped
    names = [json.dumps(redact(str(k))[0][:40])[1:-1] for k in list(data)[:30]]
    more = f", … ({len(data)} in all)" if len(data) > 30 else ""
    return ", ".join(names) + more if names else "none"


def _text(data: dict[str, Any], row: PromptRow) -> str:
    for key in row.text_keys:
        value = field(data, key, ABSENT)  # a dotted key reads a nested field (Windsurf's tool_info.user_prompt)
        if value is not ABSENT:
            if not isinstance(value, str):
                raise Malformed(f"key {key} is a JSON {json_kind(value)}, not a string; keys: {_keys(data)}")
            return value
    raise Malformed(f"the payload has none of the text keys ({', '.join(row.text_keys)}); keys: {_keys(data)}")


def is_injected(text: str) -> bool:
    return text.lstrip().startswith(INJECTED_MARKERS)


def _id_key(provider: str, prompt_id: str) -> str:
    return sha256(f"{provider}\0{prompt_id}".encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _id_index(layout: Layout, day: str) -> Path:
    """Ids seen per UTC day: a redelivery comes within seconds, so today and yesterday are enough to check."""
    return layout.prompts_dir / f".ids-{day}"


def _seen(layout: Layout, key: str, days: tuple[str, ...]) -> bool:
    needle = key.encode()
    for day in days:
        try:
            data = _id_index(layout, day).read_bytes()
        except OSError:
            continue
        if any(line.split(b" ", 1)[0] == needle for line in data.splitlines()):
            return True
    return False


def publish(layout: Layout, stamp: str, slug: str, data: bytes) -> str:
    """Create `<stamp>-<slug>[-n].json` exclusively: a clash takes the next suffix, without limit."""
    name = create_first(layout.prompts_dir, _names(stamp, slug), data, durable=True)  # bytes and name fsynced
    assert name is not None  # the names never run out
    return name


def _names(stamp: str, slug: str) -> Iterator[str]:
    yield f"{stamp}-{slug}.json"
    n = 2
    while True:
        yield f"{stamp}-{slug}-{n}.json"
        n += 1


def log(layout: Layout, provider: str, message: str) -> None:
    """One line in `.capture.log`; doctor reports the log while it is non-empty. Never a value."""
    try:
        append_line(layout.capture_log, f"{rfc3339(now_s())} capture prompt --provider {provider}: {message}")
    except (OSError, MajordomusError):
        pass  # the hook must not fail for want of a log


def keep_compiled(layout: Layout) -> None:
    """Write the worktree's kept patterns for this interpreter; a file that cannot be written costs only time."""
    from majordomus.lean import kept_patterns
    from majordomus.redact import table_sources

    try:
        kept_patterns.save(layout, table_sources())
    except (OSError, MajordomusError):
        pass


def capture(root: Path, provider_name: str, payload: bytes, *, dry_run: bool = False) -> CaptureReport:
    """Archive one prompt. Raises for admission (12) and when nothing can be written (13); otherwise exit 0."""
    provider = get_provider(provider_name)
    row = provider.prompt
    if row is None:
        raise MissingError(f"capture prompt: provider '{provider_name}' has no prompt adapter (declares prompts: "
                           f"{provider.offers.get('prompts', 'none')})",
                           "run majordomus capture status to see which providers archive prompts")
    layout = Layout(root)
    layout.require()
    rel = str(layout.prompts_dir.relative_to(root))
    try:
        ensure_dir(layout.prompts_dir)  # 0700 on every capture, whatever the umask; a symlink is refused
    except MajordomusError as exc:
        raise InternalError(f"capture prompt: {exc.message}; nothing written") from exc
    except OSError as exc:
        raise InternalError(f"capture prompt: cannot create {rel} ({exc.strerror}); nothing written") from exc
    try:
        data = parse_payload(payload)
        text = _text(data, row)
    except Malformed as exc:
        log(layout, provider_name, f"{exc}; not archived")
        return CaptureReport(0, f"capture prompt: {exc}; not archived (see {rel}/.capture.log)")
    source = first_scalar(data, row.source_keys)
    if source is not None and row.person_sources and source not in row.person_sources:
        return CaptureReport(0, "capture prompt: the payload's source is not the person; not archived")
    if is_injected(text):
        return CaptureReport(0, "capture prompt: an injected message, not the person's prompt; not archived")
    if dry_run:  # the status self-test: the real path up to here, and nothing written
        who = first_scalar(data, row.session_keys)
        return CaptureReport(0, f"capture prompt: would archive a prompt for {provider_name} "
                                f"(provider session {who})" if who else
                                f"capture prompt: would archive a prompt for {provider_name} "
                                "(orphan: no provider session)")

    prompt_id = first_scalar(data, row.id_keys)
    provider_session = first_scalar(data, row.session_keys)
    if prompt_id is None and provider_session is not None and provider.state_file is not None:
        # the task's first message is archived at its start under this id (start_prompt.py): the same text here
        # is that message again, never a second record
        from majordomus.episodes.client_state import id_if_first

        prompt_id = id_if_first(provider.state_file, provider_session, text)
    cwd = data.get("cwd") if isinstance(data.get("cwd"), str) else None
    return archive_text(layout, provider_name, row, text, event=row.event, prompt_id=prompt_id,
                        provider_session=provider_session, source=source, cwd=cwd)


def archive_text(layout: Layout, provider_name: str, row: PromptRow, text: str, *, event: str,
                 prompt_id: str | None, provider_session: str | None, source: str | None,
                 cwd: str | None, starts_turn: bool = True) -> CaptureReport:
    """Redact one person's message, resolve its episode strictly, write its record once (per prompt id);
    `starts_turn`: the episode's turn is running from it (a prompt hook's), else only its activity refreshed."""
    from majordomus.redact import keep_compiled_in, redact, take_missed

    root = layout.root
    rel = str(layout.prompts_dir.relative_to(root))
    keep_compiled_in(layout)  # the table's patterns compiled by an earlier capture: no `re` to import
    text, fired = redact(text)  # before the slug, the record, the renderings or any log line exist
    moment = now_s()
    from majordomus.episodes.vanished import end_vanished_quietly

    end_vanished_quietly(layout, spare=provider_session)  # a hook reads the episodes: a vanished client's end first
    opened = store.read_open(layout, provider_session) if provider_session is not None else None
    raced = False
    if opened is None and provider_session is not None:  # only a prompt without its episode asks (Copilot's race)
        from majordomus.episodes import starting

        look = starting.racing if row.start_races else starting.pending
        if look(layout, provider_session):
            opened = starting.wait_open(layout, provider_session)  # its SessionStart is still running
            raced = opened is not None
    branch, head = head_state(root)  # from .git's files: a prompt needs no status walk
    record = rec.PromptRecord(
        schema=rec.SCHEMA, started_at=rfc3339(moment), provider=provider_name, event=event, id=prompt_id,
        session=provider_session, episode=opened.session_id if opened else None,
        episode_link="open" if opened else "orphan",
        # the open file carries the repository_id its start computed with the same function
        repository_id=(opened.repository_id if opened else None) or repository_id(root),
        worktree_id=worktree_id(root), source=source, cwd=redact(cwd)[0] if cwd else cwd, branch=branch,
        head=head, text=text, redacted=",".join(fired) if fired else None)
    body = rec.dumps(record)
    stamp = second_stamp(moment)
    try:
        if prompt_id is None:
            name = publish(layout, stamp, rec.slug(text), body)
        else:
            key = _id_key(provider_name, prompt_id)
            days = (day_stamp(moment), day_stamp(moment - 86400))
            with file_lock(layout.locks / "prompt-ids.lock"):
                if _seen(layout, key, days):
                    return CaptureReport(0, "capture prompt: this prompt id is archived already; nothing written")
                name = publish(layout, stamp, rec.slug(text, prompt_id), body)
                append_line(_id_index(layout, days[0]), f"{key} {name}")
    except (OSError, MajordomusError) as exc:
        why = exc.message if isinstance(exc, MajordomusError) else (exc.strerror or type(exc).__name__)
        log(layout, provider_name, f"the record could not be written ({why}); the prompt is lost")
        raise InternalError(f"capture prompt: the record could not be written into {rel} ({why})") from exc
    try:
        write_renderings(layout.prompts_dir, name[: -len(".json")], record, record_bytes=body)  # rebuildable
    except (OSError, MajordomusError):
        log(layout, provider_name,
            "a rendering could not be written; the record is safe (run majordomus capture render)")
    if opened and provider_session is not None:
        try:
            store.touch_activity(layout, provider_session, starts_turn=starts_turn)
        except (OSError, MajordomusError):
            log(layout, provider_name, "the episode's last_activity_at could not be refreshed")
    if take_missed():  # after the record: the first credential in a worktree pays for the next ones
        keep_compiled(layout)
    how = f"episode {opened.session_id}, open" if opened else "orphan: no episode open for its provider session"
    if raced:
        how += "; its start was still running when the prompt arrived"
    return CaptureReport(0, f"capture prompt: archived as {rel}/{name} ({how})")
