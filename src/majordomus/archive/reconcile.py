"""`capture reconcile`: link prompt records to episodes on evidence only (SPEC 5.4), never by nearness in time.

Tier 1, the open-episode store; tier 2, the frozen working contexts; both hold the window rule (exactly one
episode of the record's provider session contains its `started_at`). Tier 3 (`ledger`): a provider session no
tier knows is linked only when exactly one unclaimed closed episode of this worktree contains its whole span.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import TypeAlias

from majordomus import ledger
from majordomus.archive import record as rec
from majordomus.archive.scan import Entry, Named, Rewriter, entries, halves, has_archive, lock_archive, record_names
from majordomus.episodes import store
from majordomus.identity import now_utc, parse_rfc3339, repository_id, worktree_id
from majordomus.layout import Layout


@dataclass(frozen=True)
class Window:
    """One episode of a provider session, as the evidence shows it: opened to closed (None: still open)."""

    session_id: str
    provider: str | None
    opened: datetime
    closed: datetime | None
    tier: rec.Link

    def contains(self, moment: datetime, now: datetime) -> bool:
        """Strictly inside, on the evidence of time alone: timestamps are to the second, so a moment in the very
        second the episode opened or closed cannot be ordered against that boundary (SPEC 5.4)."""
        return self.opened < moment and (moment < self.closed if self.closed is not None else moment <= now)

    def touches(self, moment: datetime, now: datetime) -> bool:
        """Inside or in a boundary's second: the windows a moment could belong to."""
        return self.opened <= moment <= (self.closed or now)


@dataclass
class Evidence:
    by_session: dict[str, list[Window]] = field(default_factory=dict)  # provider session -> its episodes
    claimed: set[str] = field(default_factory=set)  # episodes tiers 1 and 2 know
    closed: list[Window] = field(default_factory=list)  # tier 3's candidates: closed, this worktree, unclaimed


def gather(layout: Layout) -> Evidence:
    here = worktree_id(layout.root)
    records = {found.session_id: found for _, found in store.closed_records(layout)}
    ev = Evidence()

    def add(ps: str | None, window: Window) -> None:
        if ps and window.session_id not in ev.claimed:
            ev.by_session.setdefault(ps, []).append(window)
            ev.claimed.add(window.session_id)

    for episode in store.open_episodes(layout):
        f = episode.file
        opened = parse_rfc3339(str(f.started_at))
        if opened is not None:
            add(f.provider_session, Window(f.session_id, f.provider, opened, None, "open"))
    for ctx in store.working_contexts(layout):
        opened = parse_rfc3339(ctx.opened_at)
        if opened is None:
            continue
        written = records.get(ctx.session_id)
        closed_text = ctx.closed_at or (written.closed_at if written else None)
        closed = parse_rfc3339(str(closed_text)) if closed_text else None
        if closed is None:
            # neither open nor closed on any evidence: its end is unknown, so it contains nothing but its opening
            closed = opened
        add(ctx.provider_session, Window(ctx.session_id, ctx.provider, opened, closed, "session-context"))
    for sid, found in records.items():
        if sid in ev.claimed or found.worktree_id not in (here, None):
            continue
        opened = parse_rfc3339(str(found.started_at))
        closed = parse_rfc3339(str(found.closed_at))
        if opened is not None and closed is not None:
            ev.closed.append(Window(sid, found.provider, opened, closed, "ledger"))
    return ev


@dataclass
class Result:
    records: int = 0
    linked: int = 0
    already: int = 0
    unlinked: int = 0
    changed: int = 0  # records rewritten (or, in a dry run, that would be)
    refused_files: Named = field(default_factory=Named)  # how many records it refused, the first names and why

    @property
    def refused(self) -> int:
        return self.refused_files.count

    def sentence(self, dry_run: bool) -> str:
        if dry_run:
            line = (f"reconcile --dry-run: {self.records} record(s); {self.linked} would be linked, "
                    f"{self.already} already linked, {self.unlinked} have no evidence and stay unlinked")
        else:
            line = (f"reconcile: {self.records} record(s); {self.linked} linked, {self.already} already linked, "
                    f"{self.unlinked} unlinked for want of evidence")
        return line + self.refused_files.refused()


def _is_here(record: rec.PromptRecord, root: Path, here: str) -> bool:
    """Whether a record was captured in this worktree (tier 3 only links what happened here)."""
    if record.worktree_id is not None:
        return record.worktree_id == here
    repo = record.legacy_value("repository")
    return repo is None or repo == str(root)


@dataclass
class Span:
    """Tier 3's view of one provider session's records here: their first and last moment and providers."""

    waiting: bool = False  # a record of it waits for a link
    first: datetime | None = None
    last: datetime | None = None
    timeless: bool = False  # a record without a moment: the span cannot be known
    providers: set[str | None] = field(default_factory=set)

    def merge(self, other: Span) -> None:
        """Another part's records of the same provider session: the span of both."""
        self.waiting = self.waiting or other.waiting
        self.timeless = self.timeless or other.timeless
        self.providers |= other.providers
        if other.first is not None:
            self.first = other.first if self.first is None else min(self.first, other.first)
        if other.last is not None:
            self.last = other.last if self.last is None else max(self.last, other.last)


@dataclass
class Pass:
    """What the first pass over some records found (`scan.halves`: one part of them, or all)."""

    result: Result = field(default_factory=Result)
    spans: dict[str, Span] = field(default_factory=dict)  # tier 3: provider session -> what its records span
    changes: list[tuple[str, Decision]] = field(default_factory=list)  # decided, and the record changes
    # (name, provider session, whether it stays byte for byte as it is when tier 3 links nothing): waiting for tier 3
    deferred: list[tuple[str, str, bool]] = field(default_factory=list)

    def merge(self, part: Pass) -> None:
        """A later part's findings after these, in order."""
        for name in ("records", "linked", "already", "unlinked"):
            setattr(self.result, name, getattr(self.result, name) + getattr(part.result, name))
        self.result.refused_files.merge(part.result.refused_files)
        for ps, span in part.spans.items():
            self.spans.setdefault(ps, Span()).merge(span)
        self.changes += part.changes
        self.deferred += part.deferred


def plan(layout: Layout, scanned: Callable[[Iterable[str] | None], Iterable[Entry]], ev: Evidence, now: datetime,
         apply: Callable[[Entry, rec.PromptRecord], None] | None = None) -> Result:
    """What each record becomes, in one pass over every record holding one parsed record at a time,
    in two processes at once over a large archive (`scan.halves`): tiers 1 and 2 decide as each record passes; a
    record tier 3 may link waits, by name, until every span is known. The records that change are read again by
    name and handed to `apply`; without it (a dry run) only counted."""
    root = layout.root
    here = worktree_id(root)
    found = Pass()
    for part in halves(record_names(layout), lambda names: _first_pass(scanned(names), ev, now, root, here)):
        found.merge(part)
    result, spans, changes, deferred = found.result, found.spans, found.changes, found.deferred
    # tier 3: the whole span of a provider session inside exactly one unclaimed closed episode
    proposals: dict[str, str] = {}
    for ps, span in spans.items():
        if not span.waiting:
            continue  # nothing of this session waits for a link
        if span.timeless or len(span.providers) != 1 or span.first is None or span.last is None:
            continue
        first, last = span.first, span.last
        provider = next(iter(span.providers))
        near = [w for w in ev.closed if w.touches(first, now) and w.touches(last, now)
                and w.provider in (None, provider)]
        if len(near) == 1 and near[0].contains(first, now) and near[0].contains(last, now):
            proposals[ps] = near[0].session_id
    taken: dict[str, int] = {}
    for sid in proposals.values():
        taken[sid] = taken.get(sid, 0) + 1
    # one episode the only candidate of two sessions: at most one is right, so neither
    chosen = {ps: sid for ps, sid in proposals.items() if taken[sid] == 1}
    # a waiting record whose session tier 3 links to nothing is decided as the first pass saw it (unlinked, and
    # changed or not): only the records of a chosen session are read again
    sessions: dict[str, str] = {}
    for name, ps, stays in deferred:
        if ps in chosen:
            sessions[name] = ps
            continue
        result.unlinked += 1
        if not stays:
            changes.append((name, None))
    for entry in scanned(list(sessions)):
        if entry.record is None:  # changed under us since the pass: not ours to decide now
            result.records -= 1
            continue
        episode = chosen.get(sessions[entry.name])
        decision: Decision = None if episode is None else (episode, "ledger")
        if _decide(result, entry, entry.record, decision, root, here) is not None:
            changes.append((entry.name, decision))
    result.changed = len(changes)
    if apply is not None:
        decisions = dict(changes)
        for entry in scanned([name for name, _ in changes]):
            if entry.record is not None:
                new = _new(entry.record, decisions[entry.name], root, here)
                if new != entry.record or not entry.pretty:
                    apply(entry, new)
    return result


def _first_pass(scanned: Iterable[Entry], ev: Evidence, now: datetime, root: Path, here: str) -> Pass:
    """Tiers 1 and 2 over these records, and tier 3's spans and waiting records."""
    found = Pass()
    result, spans, changes, deferred = found.result, found.spans, found.changes, found.deferred
    for entry in scanned:
        result.records += 1
        r = entry.record
        if r is None:
            result.refused_files.add(entry.name, entry.problem)
            continue
        ps = r.session
        if ps and ps not in ev.by_session and _is_here(r, root, here):
            span = spans.setdefault(ps, Span())
            span.waiting = span.waiting or not r.is_linked
            span.providers.add(r.provider)
            moment = parse_rfc3339(str(r.started_at))
            if moment is None:
                span.timeless = True
            else:
                span.first = moment if span.first is None else min(span.first, moment)
                span.last = moment if span.last is None else max(span.last, moment)
            if not r.is_linked:
                unlinked = _new(r, None, root, here)
                deferred.append((entry.name, ps, entry.pretty and (unlinked is r or unlinked == r)))
                continue
        if r.is_linked:
            result.already += 1
            continue
        decision: Decision = None
        moment = parse_rfc3339(str(r.started_at))
        if ps and moment is not None and ps in ev.by_session:
            near = [w for w in ev.by_session[ps] if w.touches(moment, now) and (w.provider in (None, r.provider))]
            # two windows that could hold one moment: refuse to choose; one whose boundary shares the moment's
            # second orders nothing (an `orphan` said no episode was open then, and a touching window never
            # contradicts it)
            if len(near) == 1 and near[0].contains(moment, now):
                decision = (near[0].session_id, near[0].tier)
        if _decide(result, entry, r, decision, root, here) is not None:
            changes.append((entry.name, decision))
    return found


Decision: TypeAlias = "tuple[str, rec.Link] | None"


_CURRENT = frozenset(rec.FIELDS)


def _new(r: rec.PromptRecord, decision: Decision, root: Path, here: str) -> rec.PromptRecord:
    if (decision is None and r.episode is None and r.episode_link in ("orphan", "unlinked-legacy")
            and _CURRENT <= r.present):
        return r  # unlinked already, every field present: what it becomes is itself (the migrated archive's shape)
    if decision is not None:
        new = replace(r, episode=decision[0], episode_link=decision[1])
    else:
        new = replace(r, episode=None, episode_link="orphan" if r.episode_link == "orphan" else "unlinked-legacy")
    return _complete(new, root, here)


def _decide(result: Result, entry: Entry, r: rec.PromptRecord, decision: Decision, root: Path,
            here: str) -> rec.PromptRecord | None:
    """Count one unlinked record's decision; the record it becomes when that changes it, else None."""
    if decision is not None:
        result.linked += 1
    else:
        result.unlinked += 1
    new = _new(r, decision, root, here)
    return new if (new is not r and new != r) or not entry.pretty else None


def _complete(record: rec.PromptRecord, root: Path, here: str) -> rec.PromptRecord:
    """A legacy record gains every field of the current order; identity only when it was captured here."""
    mine = record.legacy_value("repository") in (None, str(root))
    if "repository_id" not in record.present:
        record = replace(record, repository_id=_repository_id(root) if mine else None)
    if "worktree_id" not in record.present:
        record = replace(record, worktree_id=here if mine else None)
    return record.completed()


_REPO_ID: dict[Path, str] = {}


def _repository_id(root: Path) -> str:
    if root not in _REPO_ID:
        _REPO_ID[root] = repository_id(root)
    return _REPO_ID[root]


def reconcile(layout: Layout, *, dry_run: bool = False, now: datetime | None = None) -> Result:
    moment = now or now_utc()
    if not has_archive(layout):
        return Result()
    if dry_run:
        return plan(layout, lambda names: entries(layout, names), gather(layout), moment)
    with lock_archive(layout), Rewriter(layout) as rewriter:  # the rewrites in batches of fsyncs
        result = plan(layout, lambda names: entries(layout, names), gather(layout), moment, rewriter.add)
    ledger.append(layout, "prompts.reconciled", records=result.records, linked=result.linked,
                  unlinked=result.unlinked, refused=result.refused, already_linked=result.already)
    return result
