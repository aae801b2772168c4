"""The episodes of this repository as one timeline: closed records and this worktree's open episodes.

Closed records come from `.ai/repo/sessions/` (tracked: every clone's episodes), open and detached ones from
this worktree's `sessions-open/`; both through `episodes.store`, the one reader of those files.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from majordomus import ledger
from majordomus.episodes import store
from majordomus.errors import UsageError
from majordomus.identity import now_utc, parse_rfc3339, worktree_id
from majordomus.layout import Layout

if TYPE_CHECKING:
    from typing import Any

STATES = ("closed", "interrupted", "open", "detached")


@dataclass(frozen=True)
class Episode:
    """One episode as the timeline shows it, whichever file it comes from."""

    id: str
    provider: str | None
    state: str  # closed | interrupted (the record's outcome; unknown when it names neither) | open | detached
    started_at: str | None
    closed_at: str | None
    branch: str | None
    title: str | None
    worktree_id: str | None
    start_head: str | None
    head: str | None
    end_reason: str | None = None
    last_turn: str | None = None
    compactions: int = 0
    changed_files: tuple[str, ...] = ()
    commits: tuple[str, ...] = ()
    truncated: tuple[str, ...] = ()
    path: Path | None = None  # the record, or the open file
    provider_session: str | None = None  # known for open episodes; for closed ones see `client_session`
    detached_at: str | None = None
    last_activity_at: str | None = None
    schema_note: str | None = None  # set when the record is of an older writer (no provider, no end reason)

    @property
    def is_open(self) -> bool:
        return self.state in ("open", "detached")

    @property
    def outcome(self) -> str | None:
        return self.state if self.state in ("closed", "interrupted") else None

    def duration_seconds(self, now: datetime | None = None) -> int | None:
        start = parse_rfc3339(self.started_at or "")
        end = parse_rfc3339(self.closed_at or "") if self.closed_at else (now or now_utc()) if self.is_open else None
        if start is None or end is None:
            return None
        return max(0, int((end - start).total_seconds()))

    def to_json(self, prompts: int, root: Path) -> dict[str, Any]:
        """The stable shape of `episodes --json` (docs/episodes-command.md)."""
        rel = str(self.path.relative_to(root)) if self.path is not None and self.path.is_relative_to(root) else None
        return {"id": self.id, "provider": self.provider, "state": self.state, "outcome": self.outcome,
                "started_at": self.started_at, "closed_at": self.closed_at,
                "duration_seconds": self.duration_seconds(), "branch": self.branch, "prompts": prompts,
                "title": self.title, "end_reason": self.end_reason, "last_turn": self.last_turn,
                "worktree_id": self.worktree_id, "record": rel}


def _closed(path: Path, r: store.SessionRecord) -> Episode:
    # a record without a known outcome is shown as such, never as one of the two words it does not say
    outcome = r.outcome if r.outcome in ("closed", "interrupted") else "unknown"
    old = None if r.provider is not None else "written by an older writer: no provider or end reason recorded"
    return Episode(id=r.session_id, provider=r.provider, state=outcome, started_at=r.started_at,
                   closed_at=r.closed_at, branch=r.branch, title=r.title, worktree_id=r.worktree_id,
                   start_head=r.start_head, head=r.head, end_reason=r.end_reason, last_turn=r.last_turn,
                   compactions=r.compactions, changed_files=r.changed_files, commits=r.commits,
                   truncated=r.truncated, path=path, schema_note=old)


def _open(item: store.OpenEpisode) -> Episode:
    f = item.file
    detached = f.is_connection and f.detached_at is not None
    return Episode(id=f.session_id, provider=f.provider, state="detached" if detached else "open",
                   started_at=f.started_at, closed_at=None, branch=f.branch,
                   title=f"Session {f.session_id} on {f.branch}", worktree_id=f.worktree_id,
                   start_head=f.start_head, head=None, last_turn=f.last_turn, compactions=f.compactions,
                   path=item.path, provider_session=f.provider_session, detached_at=f.detached_at,
                   last_activity_at=f.last_activity_at)


def all_episodes(layout: Layout) -> list[Episode]:
    """Every episode, newest first, by its start. Starts are to the second: within one second this checkout's
    ledger (the order of its `session.started` lines) says which came first, and the id breaks what is left.
    An episode whose record exists and whose open file a killed close left behind is shown once, as its record.
    A hook episode whose client process is gone is closed first (SPEC 4.4), so it is shown as what it is."""
    from majordomus.episodes.vanished import end_vanished_quietly

    end_vanished_quietly(layout)
    out: dict[str, Episode] = {}
    for path, record in store.closed_records(layout):
        out.setdefault(record.session_id, _closed(path, record))
    here = worktree_id(layout.root)
    for item in store.open_episodes(layout):
        if item.file.session_id not in out:
            found = _open(item)
            out[found.id] = found if found.worktree_id else replace(found, worktree_id=here)
    order = {line.get("session"): n for n, line in enumerate(ledger.read(layout))
             if line.get("event") == "session.started"}
    return sorted(out.values(), key=lambda e: (e.started_at or "", order.get(e.id, -1), e.id), reverse=True)


_RELATIVE = re.compile(r"(?P<n>[0-9]{1,6})\s*(?P<unit>[smhdw])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_moment(raw: str, flag: str, *, now: datetime | None = None) -> str:
    """`--since`/`--until`: an RFC 3339 time, a date (`2026-12-02`, midnight UTC), or an age (`3d`, `12h`, `90m`,
    `2w`) before now. The RFC 3339 string it means, or a usage error saying what is accepted."""
    text = raw.strip()
    match = _RELATIVE.fullmatch(text)
    if match:
        moment = (now or now_utc()) - timedelta(seconds=int(match["n"]) * _UNITS[match["unit"]])
        return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
    for shape in ("%Y-%m-%dT%H:%M:%SZ", "%Y-%m-%dT%H:%M:%S%z", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M", "%Y-%m-%d"):
        try:
            moment = datetime.strptime(text, shape)
        except ValueError:
            continue
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)
        return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    raise UsageError(f"{flag} {raw!r} is not a time majordomus reads",
                     "give a date (2026-12-02), a UTC time (2026-12-02T08:00:00Z) or an age (3d, 12h, 90m)")


@dataclass(frozen=True)
class Filters:
    """The filters `episodes` and `search` share; each None (or False) admits everything."""

    outcome: str | None = None
    provider: str | None = None
    branch: str | None = None
    since: str | None = None
    until: str | None = None
    open_only: bool = False
    limit: int | None = None

    def admits(self, e: Episode) -> bool:
        if self.open_only and not e.is_open:
            return False
        if self.outcome is not None and e.state != self.outcome:
            return False
        if self.provider is not None and e.provider != self.provider:
            return False
        if self.branch is not None and e.branch != self.branch:
            return False
        return self.admits_time(e.started_at)

    def admits_time(self, at: str | None) -> bool:
        if self.since is not None and (at is None or at < self.since):
            return False
        return not (self.until is not None and (at is None or at > self.until))

    @property
    def narrows_episodes(self) -> bool:
        """Whether a prompt's own episode must pass (outcome and open state are its episode's)."""
        return self.open_only or self.outcome is not None


def select(episodes: Iterable[Episode], filters: Filters) -> list[Episode]:
    chosen = [e for e in episodes if filters.admits(e)]
    return chosen if filters.limit is None else chosen[: filters.limit]


def by_prefix(episodes: list[Episode], arg: str) -> list[Episode]:
    """Episodes whose id is `arg` or starts with it (with or without the `s-`)."""
    text = arg.strip()
    exact = [e for e in episodes if e.id == text]
    if exact:
        return exact
    if not text:
        return []
    wanted = text if text.startswith("s-") else f"s-{text}"
    return [e for e in episodes if e.id.startswith(wanted)]
