"""When a real event from each client last reached capture in this worktree: the ledger and the prompt records.

A dry run (capture status's self-test) writes nothing, so only a client's own hook calls count. Bounded: the
ledger is read from its last LEDGER_TAIL bytes, the prompt archive from its newest PROMPT_SCAN records; an
event older than both reads as `never` seen here, which the reason then says.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from majordomus.archive.record import RecordError, is_record_name, load
from majordomus.layout import Layout

LEDGER_TAIL = 1024 * 1024
PROMPT_SCAN = 2000
SESSION_EVENTS = ("session.started", "session.compacted", "session.closed")


def _ledger_tail(path: Path) -> list[bytes]:
    try:
        with open(path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - LEDGER_TAIL))
            data = f.read(LEDGER_TAIL)
    except OSError:
        return []
    lines = data.split(b"\n")
    return lines[1:] if size > LEDGER_TAIL else lines  # the first of a tail may be cut


def last_events(root: Path) -> dict[tuple[str, str], str]:
    """(provider, "session"|"prompt") -> the RFC 3339 time of the newest real event of that aspect here."""
    layout = Layout(root)
    out: dict[tuple[str, str], str] = {}
    providers_of: dict[str, str] = {}

    def seen(provider: object, aspect: str, at: object) -> None:
        if isinstance(provider, str) and isinstance(at, str) and at > out.get((provider, aspect), ""):
            out[(provider, aspect)] = at

    for line in _ledger_tail(layout.ledger_file):
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if not isinstance(entry, dict) or entry.get("event") not in SESSION_EVENTS:
            continue
        provider = entry.get("provider") or providers_of.get(str(entry.get("session")))
        if entry.get("event") == "session.started" and isinstance(entry.get("session"), str):
            providers_of[entry["session"]] = str(provider)
        seen(provider, "session", entry.get("ts"))
    try:
        names = sorted((n for n in os.listdir(layout.prompts_dir) if is_record_name(n)), reverse=True)
    except OSError:
        names = []
    for name in names[:PROMPT_SCAN]:
        try:
            record = load(layout.prompts_dir / name)
        except (OSError, RecordError):
            continue
        seen(record.provider, "prompt", record.started_at)
    return out
