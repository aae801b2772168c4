"""A task's first message, archived at the task's start from the client's own session file (providers.yaml
`state_file`: Cline, whose prompt hook never fires for it and whose TaskStart payload carries no message).

One id per session (client_state.first_id): a start kept or repeated, or a prompt hook that sends the same text
after all, finds it archived and writes nothing. Run from the start hook after the boundary; it never fails the hook.
Stdlib only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from majordomus.archive.capture import archive_text, is_injected, log
from majordomus.clients.payload import Malformed, first_scalar, parse_payload
from majordomus.episodes.client_state import first_id, first_prompt
from majordomus.errors import MajordomusError
from majordomus.layout import Layout, ensure_dir

if TYPE_CHECKING:
    from pathlib import Path

    from majordomus.clients.providers import Provider


def capture_start_prompt(root: Path, provider: Provider, payload: bytes) -> str | None:
    """Archive the task's first message of this start, if the file says it is this task's; the report's words,
    or None when there is nothing to archive here (a resumed task, a later run, no file)."""
    row, prompt, session_row = provider.state_file, provider.prompt, provider.session
    if row is None or not row.prompt_key or prompt is None or session_row is None:
        return None
    layout = Layout(root)
    try:
        data = parse_payload(payload)
    except Malformed:
        return None  # the boundary said so already, in its own log
    session = first_scalar(data, session_row.session_keys)
    if session is None or first_scalar(data, session_row.source_keys) not in row.prompt_sources:
        return None
    try:
        dispatched = data.get(row.dispatched_key) if row.dispatched_key else None  # when the client sent it
        text = first_prompt(row, session, dispatched if isinstance(dispatched, str) else None)
        if text is None:
            return None
        if is_injected(text):
            return "its first message is injected, not the person's; not archived"
        ensure_dir(layout.prompts_dir)  # 0700 whatever the umask; a symlink is refused
        cwd = data.get("cwd") if isinstance(data.get("cwd"), str) else None
        report = archive_text(layout, provider.name, prompt, text, event=row.prompt_event,
                              prompt_id=first_id(session), provider_session=session, source=None, cwd=cwd,
                              starts_turn=False)  # the client's TaskComplete may have ended this turn already
    except (OSError, MajordomusError, ValueError) as exc:  # the start hook goes on: the episode is drawn
        detail = exc.message if isinstance(exc, MajordomusError) else type(exc).__name__
        log(layout, provider.name, f"the task's first message could not be archived at its start ({detail})")
        return "its first message could not be archived (see the capture log)"
    return report.line.removeprefix("capture prompt: ")
