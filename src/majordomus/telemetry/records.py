"""What an OTLP export sends, as plain values: one span per ended episode, one log record per prompt.

Built from the record only (stdlib, no opentelemetry), so `export --otlp --dry-run` prints exactly this and the
encoder (`telemetry.otlp`) turns the very same values into the SDK's spans and log records. Trace and span ids
are derived from the repository and episode ids: a re-send after a partial failure carries the same ids, so a
backend that deduplicates sees one span. Prompt texts are never in a log record unless `with_prompts`, and then
only the archived text, which capture already redacted.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from functools import lru_cache
from hashlib import blake2b, sha256
from typing import TYPE_CHECKING

from majordomus import __version__, ledger
from majordomus.archive import scan
from majordomus.archive.record import PromptRecord
from majordomus.episodes import store
from majordomus.history.timeline import Episode
from majordomus.identity import parse_rfc3339
from majordomus.layout import Layout
from majordomus.usage.episode import Counts, Usage, bill, known, policy_overrides, usage_of
from majordomus.usage.prices import Price

if TYPE_CHECKING:
    from typing import Any

SCOPE = "majordomus.export"
REDACTED_MARK = "[redacted:"  # what majordomus.redact puts in place of each credential it replaced
ENDED = ("closed", "interrupted", "unknown")  # an open or detached episode is sent when it ends

# a client's model vendor, as the GenAI conventions name it (gen_ai.provider.name); a client not here has none
GEN_AI_PROVIDERS = {"claude-code": "anthropic", "codex": "openai", "gemini": "gcp.gemini"}


def trace_id(repository: str, episode: str) -> int:
    return int.from_bytes(sha256(f"majordomus/trace/{repository}/{episode}".encode()).digest()[:16], "big") or 1


def span_id(repository: str, episode: str) -> int:
    return int.from_bytes(sha256(f"majordomus/span/{repository}/{episode}".encode()).digest()[:8], "big") or 1


def prompt_key(name: str) -> str:
    """The cursor's key of a prompt record: a digest of its file name (the name carries the text's opening)."""
    return blake2b(name.encode("utf-8", "surrogateescape"), digest_size=8).hexdigest()


_EPOCH_DAY = date(1970, 1, 1).toordinal()


@lru_cache(maxsize=1024)
def _epoch_day(year: int, month: int, day: int) -> int | None:
    """Days since 1970-01-01, None for a date that does not exist; an export's timestamps share a few days."""
    try:
        return date(year, month, day).toordinal() - _EPOCH_DAY
    except ValueError:
        return None


def nanos(at: str | None) -> int | None:
    """`2026-12-06T19:10:56Z` in nanoseconds since the epoch, None when it is not that shape. The record's one
    shape read by slicing, its day cached (strptime was 40% of an export's encoding, a datetime per stamp 12%);
    the same answer as `parse_rfc3339`, which reads every other shape."""
    if not at:
        return None
    if len(at) == 20 and at[4] == at[7] == "-" and at[10] == "T" and at[13] == at[16] == ":" and at[19] == "Z":
        digits = at[0:4] + at[5:7] + at[8:10] + at[11:13] + at[14:16] + at[17:19]
        if digits.isascii() and digits.isdigit():
            hour, minute, second = int(at[11:13]), int(at[14:16]), int(at[17:19])
            day = _epoch_day(int(at[0:4]), int(at[5:7]), int(at[8:10]))
            if day is None or hour > 23 or minute > 59 or second > 59:
                return None
            return (day * 86400 + hour * 3600 + minute * 60 + second) * 1_000_000_000
    moment = parse_rfc3339(at)
    return None if moment is None else (moment - _EPOCH) // timedelta(seconds=1) * 1_000_000_000


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


@dataclass(frozen=True)
class Span:
    episode: str
    trace_id: int
    span_id: int
    name: str
    start: int
    end: int
    status: str  # ok | error | unset
    description: str | None
    attributes: dict[str, Any]
    events: tuple[tuple[str, int, dict[str, Any]], ...]  # (name, time in ns, attributes)

    def to_json(self) -> dict[str, Any]:
        return {"signal": "span", "name": self.name, "trace_id": f"{self.trace_id:032x}",
                "span_id": f"{self.span_id:016x}", "start_time_unix_nano": self.start,
                "end_time_unix_nano": self.end, "status": self.status, "status_description": self.description,
                "attributes": self.attributes,
                "events": [{"name": n, "time_unix_nano": t, "attributes": a} for n, t, a in self.events]}


@dataclass(frozen=True)
class Log:
    key: str
    time: int
    trace_id: int | None
    span_id: int | None
    event_name: str
    body: str | None
    attributes: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"signal": "log", "event_name": self.event_name, "time_unix_nano": self.time,
                "trace_id": None if self.trace_id is None else f"{self.trace_id:032x}",
                "span_id": None if self.span_id is None else f"{self.span_id:016x}",
                "body": self.body, "attributes": self.attributes}


def resource_attributes(repository: str) -> dict[str, Any]:
    return {"service.name": "majordomus", "service.version": __version__, "majordomus.repository.id": repository}


class Sources:
    """What the spans need beyond the records, read once for the whole export (never once per episode): the
    ledger's compaction times and client sessions, the working contexts' client sessions, linked prompts."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self.prices = policy_overrides(layout)
        self.known = known(layout)  # each episode's client session and close moments, for its usage
        self.counts = Counts(layout)  # the usage counts kept: read once, saved once the spans are made
        self.compacted: dict[str, list[str]] = {}
        self.client_sessions: dict[str, str] = {}
        for line in ledger.read(layout):
            sid, event = line.get("session"), line.get("event")
            if not isinstance(sid, str):
                continue
            if event == "session.compacted" and isinstance(line.get("ts"), str):
                self.compacted.setdefault(sid, []).append(line["ts"])
            elif event == "session.started" and isinstance(line.get("provider_session"), str):
                self.client_sessions.setdefault(sid, line["provider_session"])
        for ctx in store.working_contexts(layout):
            if ctx.provider_session:
                self.client_sessions.setdefault(ctx.session_id, ctx.provider_session)
        self.turns: dict[str, list[str]] = {}  # episode -> its linked prompts' started_at


def _put(attrs: dict[str, Any], key: str, item: object) -> None:
    if item is not None and item != "":
        attrs[key] = item


def episode_span(repository: str, e: Episode, sources: Sources, used: Usage | None = None) -> Span | None:
    """The span of an ended episode; None for one still open, or one without a readable start."""
    start = nanos(e.started_at)
    if e.state not in ENDED or start is None:
        return None
    end = max(start, nanos(e.closed_at) or start)
    attrs: dict[str, Any] = {"session.id": e.id}
    _put(attrs, "gen_ai.conversation.id", e.provider_session or sources.client_sessions.get(e.id))
    _put(attrs, "gen_ai.provider.name", GEN_AI_PROVIDERS.get(e.provider or ""))
    _put(attrs, "gen_ai.agent.name", e.provider)
    _put(attrs, "vcs.ref.head.name", e.branch)
    _put(attrs, "vcs.ref.head.revision", e.head)
    _put(attrs, "vcs.ref.base.revision", e.start_head)
    attrs["majordomus.repository.id"] = repository
    _put(attrs, "majordomus.worktree.id", e.worktree_id)
    _put(attrs, "majordomus.episode.outcome", e.state)
    _put(attrs, "majordomus.episode.end_reason", e.end_reason)
    _put(attrs, "majordomus.episode.last_turn", e.last_turn)
    attrs["majordomus.episode.compactions"] = e.compactions
    attrs["majordomus.episode.commits"] = len([c for c in e.commits if c != "diverged"])
    attrs["majordomus.episode.changed_files"] = len(e.changed_files)
    if used is not None:
        _usage(attrs, used, sources.prices)
    events: list[tuple[str, int, dict[str, Any]]] = []
    times = sources.compacted.get(e.id, [])
    for n in range(1, e.compactions + 1):
        at = nanos(times[n - 1]) if n <= len(times) else None
        events.append(("majordomus.compaction", at if at is not None else end,
                       {"majordomus.compaction.number": n, "majordomus.compaction.time_known": at is not None}))
    for n, at_text in enumerate(sources.turns.get(e.id, []), 1):  # how each was linked is in its log record
        at = nanos(at_text)
        events.append(("majordomus.turn", at if at is not None else start, {"majordomus.turn.number": n}))
    events.sort(key=lambda ev: ev[1])
    status = "ok" if e.state == "closed" else "error" if e.state == "interrupted" else "unset"
    why = (e.end_reason or "interrupted") if status == "error" else None
    return Span(e.id, trace_id(repository, e.id), span_id(repository, e.id), f"episode {e.provider or 'unknown'}",
                start, end, status, why, attrs, tuple(events))


def _usage(attrs: dict[str, Any], used: Usage, prices: dict[str, Price]) -> None:
    """The GenAI conventions' usage attributes (input counts every prompt token, cached ones too) and the cost."""
    attrs["majordomus.usage.state"] = used.state
    if used.state != "counted":
        return
    t = used.tokens
    attrs["gen_ai.usage.input_tokens"] = t.input + t.cache_read + t.cache_write
    attrs["gen_ai.usage.output_tokens"] = t.output
    attrs["gen_ai.usage.cache_read.input_tokens"] = t.cache_read
    attrs["gen_ai.usage.cache_creation.input_tokens"] = t.cache_write
    if used.models:  # the model that did most of the work; every model is in majordomus.usage.models
        _put(attrs, "gen_ai.request.model", max(used.models, key=lambda m: (m.tokens.total, m.model)).model)
        attrs["majordomus.usage.models"] = [m.model for m in used.models]
    cost = bill(used, prices).total
    if cost is not None:
        attrs["majordomus.usage.cost_usd"] = cost


def prompt_log(repository: str, name: str, r: PromptRecord, with_prompts: bool) -> Log | None:
    """The log record of one prompt: its metadata, and its (redacted) text only `with_prompts`."""
    at = nanos(r.started_at)
    if at is None:
        return None
    linked = r.is_linked and r.episode is not None
    attrs: dict[str, Any] = {"log.record.uid": prompt_key(name)}
    _put(attrs, "session.id", r.episode if linked else None)
    _put(attrs, "gen_ai.conversation.id", r.session)
    _put(attrs, "gen_ai.provider.name", GEN_AI_PROVIDERS.get(r.provider or ""))
    _put(attrs, "gen_ai.agent.name", r.provider)
    attrs["majordomus.repository.id"] = repository
    _put(attrs, "majordomus.worktree.id", r.worktree_id)
    _put(attrs, "vcs.ref.head.name", r.branch)
    attrs["majordomus.prompt.episode_link"] = r.episode_link or "unknown"
    attrs["majordomus.prompt.length"] = 0 if r.text is None else len(r.text)
    attrs["majordomus.prompt.redacted"] = [s for s in (r.redacted or "").split(",") if s]
    attrs["majordomus.prompt.redactions"] = 0 if r.text is None else r.text.count(REDACTED_MARK)
    attrs["majordomus.prompt.pruned"] = r.pruned_at is not None
    if r.pruned_bytes is not None:
        attrs["majordomus.prompt.pruned_bytes"] = r.pruned_bytes
    body = r.text if with_prompts and r.text is not None else None
    return Log(prompt_key(name), at, trace_id(repository, r.episode) if linked and r.episode else None,
               span_id(repository, r.episode) if linked and r.episode else None, "majordomus.prompt", body, attrs)


def note_turns(layout: Layout, sources: Sources) -> None:
    """The turns of each episode (its linked prompts' starts and links), into `sources`, one record at a time."""
    for entry in scan.entries(layout):
        r = entry.record
        if r is not None and r.is_linked and r.episode:
            sources.turns.setdefault(r.episode, []).append(r.started_at or "")
    for turns in sources.turns.values():
        turns.sort()


def prompts(layout: Layout, repository: str, with_prompts: bool) -> Iterator[Log]:
    """Each prompt record's log record, oldest first, one record parsed at a time."""
    for entry in scan.entries(layout):
        r = entry.record
        if r is None:
            continue
        log = prompt_log(repository, entry.name, r, with_prompts)
        if log is not None:
            yield log


def spans(repository: str, episodes: Iterable[Episode], sources: Sources) -> Iterator[Span]:
    """The span of each ended episode, oldest first (call `note_turns` first for its turn events)."""
    for e in sorted(episodes, key=lambda e: (e.started_at or "", e.id)):
        used = usage_of(sources.layout, e, sources.known.get(e.id), counts=sources.counts) \
            if e.state in ENDED else None
        found = episode_span(repository, e, sources, used)
        if found is not None:
            yield found
    sources.counts.save()
