"""The usage of one episode: which reader, which files, the window, the cache, and the sentence for each way it
cannot be known. `usages` answers for many episodes at once (the client sessions are looked up once).

Read only for an ended episode, from the files the reader finds where its client writes them (the environment
of this command: HOME, CLAUDE_CONFIG_DIR, CODEX_HOME, …). The count is kept in `.ai/local/state/usage.json`,
checked against each file's size and modification time, so a listing reads a transcript once.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Literal, Protocol

from majordomus import ledger
from majordomus.episodes import store
from majordomus.layout import Layout, refuse_symlink, write_atomic
from majordomus.usage import claude_code, codex, copilot, gemini
from majordomus.usage.prices import Price, price_of
from majordomus.usage.tally import Tally, Tokens, Window, epoch

READERS: dict[str, ModuleType] = {"claude-code": claude_code, "codex": codex, "gemini": gemini,
                                  "copilot": copilot}
CACHE_SCHEMA = "majordomus.usage-cache/v1"  # a new reader rule gets a new number: every count is made again

State = Literal["counted", "pending", "unsupported", "unknown-session", "missing", "unreadable"]


class EpisodeLike(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def provider(self) -> str | None: ...
    @property
    def started_at(self) -> str | None: ...
    @property
    def closed_at(self) -> str | None: ...
    @property
    def provider_session(self) -> str | None: ...


@dataclass(frozen=True)
class ModelCount:
    model: str
    tokens: Tokens
    requests: int


@dataclass(frozen=True)
class Usage:
    state: State
    models: tuple[ModelCount, ...] = ()
    note: str | None = None

    @property
    def tokens(self) -> Tokens:
        total = Tokens()
        for m in self.models:
            total = total + m.tokens
        return total


@dataclass(frozen=True)
class Bill:
    """What the usage cost: per model (None where its price is unknown), the total only when every model with
    tokens has a price."""

    per_model: tuple[tuple[ModelCount, Price | None, float | None], ...]
    total: float | None
    unknown: tuple[str, ...]

    @property
    def shown(self) -> str | None:
        if self.total is not None:
            return dollars(self.total)
        return "price unknown" if self.unknown else None


def dollars(amount: float) -> str:
    return f"${amount:,.2f}" if amount >= 1 else f"${amount:.4f}"


def bill(usage: Usage, overrides: dict[str, Price]) -> Bill:
    rows, unknown, total = [], [], 0.0
    for m in usage.models:
        price = price_of(m.model, overrides)
        cost = None if price is None else price.cost(m.tokens)
        if cost is None and m.tokens.total:
            unknown.append(m.model)
        rows.append((m, price, cost))
        total += cost or 0.0
    known = usage.state == "counted" and not unknown
    return Bill(tuple(rows), round(total, 6) if known else None, tuple(unknown))


def usage_json(usage: Usage, overrides: dict[str, Price]) -> dict[str, Any]:
    """The `usage` member of `episodes --json`, `show --json` and the export (docs/usage.md)."""
    b = bill(usage, overrides)
    t = usage.tokens
    return {"state": usage.state, "input_tokens": t.input, "output_tokens": t.output,
            "cache_read_tokens": t.cache_read, "cache_write_tokens": t.cache_write,
            "models": [{"model": m.model, "requests": m.requests, "input_tokens": m.tokens.input,
                        "output_tokens": m.tokens.output, "cache_read_tokens": m.tokens.cache_read,
                        "cache_write_tokens": m.tokens.cache_write,
                        "cost_usd": None if cost is None else round(cost, 6),
                        "price": None if price is None else {"as_of": price.as_of, "source": price.source}}
                       for m, price, cost in b.per_model],
            "cost_usd": b.total, "cost": b.shown, "note": usage.note}


# -- what this checkout knows of an episode ------------------------------------------------------------------
@dataclass(frozen=True)
class Known:
    """Beyond its record: the client's session id, and the moments that split its window from its neighbours'
    in the same client session (see `Window`)."""

    session: str | None
    after: float | None = None  # when the episode before it in the same client session was closed
    until: float | None = None  # when it was closed, to the sub-second


def known(layout: Layout) -> dict[str, Known]:
    """Every episode this checkout's working contexts (else its ledger) know: its client session, and each close
    to the sub-second, which is the moment its working context was last written (the close is its last write;
    a moment outside the close's own second, as a copied file has, is not taken)."""
    sessions: dict[str, str] = {}
    for line in ledger.read(layout):
        ps = line.get("provider_session")
        if line.get("event") == "session.started" and isinstance(ps, str) and ps:
            sessions.setdefault(str(line.get("session")), ps)
    closes: dict[str, tuple[str, float | None]] = {}  # episode -> (opened_at, its close to the sub-second)
    for ctx in store.working_contexts(layout):
        if ctx.provider_session:
            sessions[ctx.session_id] = ctx.provider_session
        closes[ctx.session_id] = (ctx.opened_at, _close_moment(layout, ctx))
    by_session: dict[str, list[str]] = {}
    for sid, ps in sessions.items():
        by_session.setdefault(ps, []).append(sid)
    out: dict[str, Known] = {}
    for ps, sids in by_session.items():
        sids.sort(key=lambda sid: closes.get(sid, ("", None))[0])
        before: float | None = None
        for sid in sids:
            until = closes.get(sid, ("", None))[1]
            out[sid] = Known(ps, before, until)
            before = until
    return out


def _close_moment(layout: Layout, ctx: store.WorkingContext) -> float | None:
    from majordomus.episodes.boundary import context_path

    close = epoch(ctx.closed_at) if ctx.closed_at else None
    if close is None:
        return None
    try:
        written = context_path(layout, ctx.session_id, ctx.opened_at).stat().st_mtime_ns / 1e9
    except OSError:
        return None
    return written if close <= written < close + 2 else None


def usages(layout: Layout, episodes: Iterable[EpisodeLike], env: Mapping[str, str] | None = None
           ) -> dict[str, Usage]:
    episodes = list(episodes)
    ended = any(e.closed_at for e in episodes)
    what, counts = (known(layout), Counts(layout)) if ended else ({}, None)
    found = {e.id: usage_of(layout, e, what.get(e.id), env, counts) for e in episodes}
    if counts is not None:
        counts.save()
    return found


def usage_of(layout: Layout, e: EpisodeLike, know: Known | None, env: Mapping[str, str] | None = None,
             counts: Counts | None = None) -> Usage:
    """One episode's usage; `counts` is where counts are kept (a listing passes one for all its episodes, and
    saves it; without one, this call reads and saves its own)."""
    if counts is None and e.closed_at:
        counts = Counts(layout)
        try:
            return usage_of(layout, e, know, env, counts)
        finally:
            counts.save()
    reader = READERS.get(e.provider or "")
    if reader is None:
        what = ("an MCP connection episode: its client's model usage never reaches majordomus"
                if e.provider == "generic" else
                f"majordomus has no reader of {e.provider or 'this client'}'s own record of its conversations")
        return Usage("unsupported", note=what)
    if not e.closed_at or not e.started_at:
        return Usage("pending", note="still open: its usage is read from the client's record once it ends")
    session = (know.session if know else None) or e.provider_session
    if not session:
        return Usage("unknown-session", note="the client's session id of this episode is not known in this "
                                             "checkout (it is kept in the working context where the episode ran)")
    if not is_plain_name(session):
        return Usage("unknown-session", note=f"the client's session id {session[:80]!r} is not a name a client's file "
                                             "can have, so no file is looked for")
    env = os.environ if env is None else env
    try:
        window = Window.of(e.started_at, e.closed_at, after=know.after if know else None,
                           until=know.until if know else None)
    except ValueError:
        return Usage("unknown-session", note=f"the record's moments ({e.started_at}, {e.closed_at}) are not times")
    kept = counts.get(e.id, session, window) if counts is not None else None
    if kept is not None:
        return kept
    paths = reader.locate(session, env, e.started_at)
    if not paths:
        return Usage("missing", note=f"no {reader.TITLE} record of session {session} was found at "
                                     f"{reader.where(env)}")
    tally = Tally()
    try:
        stamps = [_stamp(p) for p in paths]
        reader.read(paths, window, tally)
    except OSError as exc:
        return Usage("unreadable", note=f"{reader.TITLE}'s record of session {session} could not be read: "
                                        f"{exc.strerror or exc}")
    found = _usage(tally, reader.TITLE, paths)
    if counts is not None:
        counts.put(e.id, session, window, stamps, found)
    return found


def is_plain_name(session: str) -> bool:
    """Whether a client session id can stand in a file name as it is: the readers build paths of it, and it comes
    from a hook's payload (no separator, no NUL, not `.` or `..`, not too long)."""
    return 0 < len(session) <= 200 and "/" not in session and "\0" not in session and session not in (".", "..")


def _usage(tally: Tally, title: str, paths: list[Path]) -> Usage:
    notes = []
    if tally.skipped:
        notes.append(f"{tally.skipped} entr{'y' if tally.skipped == 1 else 'ies'} of {', '.join(map(str, paths))} "
                     f"{'was' if tally.skipped == 1 else 'were'} not what {title} writes and "
                     f"{'was' if tally.skipped == 1 else 'were'} not counted")
    if tally.cut:
        notes.append(tally.cut)
    if not tally.models:
        notes.append(f"{title}'s record holds no answer of a model inside this episode's window")
    models = tuple(ModelCount(name, tokens, tally.requests.get(name, 0))
                   for name, tokens in sorted(tally.models.items()))
    return Usage("counted", models, "; ".join(notes) or None)


# -- the counts kept -----------------------------------------------------------------------------------------------
class Counts:
    """`.ai/local/state/usage.json`: each episode's count, with the client session and window it was made for and
    each file's size and modification time then; a count whose files changed is made again. One file for every
    episode, read once and written once by a listing (a file each cost more to create than its reading saved).
    Two commands writing at once each write whole: a count lost is made again next time."""

    def __init__(self, layout: Layout) -> None:
        self.path = layout.state / "usage.json"
        self.changed = False
        self.kept: dict[str, Any] = {}
        try:
            if not self.path.is_symlink():
                doc = json.loads(self.path.read_bytes())
                if isinstance(doc, dict) and doc.get("schema") == CACHE_SCHEMA and isinstance(doc.get("episodes"),
                                                                                              dict):
                    self.kept = doc["episodes"]
        except (OSError, ValueError):
            pass

    def get(self, episode: str, session: str, window: Window) -> Usage | None:
        doc = self.kept.get(episode)
        if not isinstance(doc, dict):
            return None
        try:
            if doc["session"] != session or doc["window"] != [window.start, window.end]:
                return None
            for path, size, mtime in doc["files"]:
                st = os.stat(path)
                if st.st_size != size or st.st_mtime_ns != mtime:
                    return None
            models = tuple(ModelCount(str(m["model"]), Tokens.from_json(m), int(m["requests"]))
                           for m in doc["models"])
            return Usage("counted", models, doc.get("note"))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def put(self, episode: str, session: str, window: Window, stamps: list[list[Any]], usage: Usage) -> None:
        self.kept[episode] = {"session": session, "window": [window.start, window.end], "files": stamps,
                              "models": [{"model": m.model, "requests": m.requests, **m.tokens.to_json()}
                                         for m in usage.models], "note": usage.note}
        self.changed = True

    def save(self) -> None:
        if not self.changed:
            return
        try:
            refuse_symlink(self.path)
            write_atomic(self.path, json.dumps({"schema": CACHE_SCHEMA, "episodes": self.kept}).encode(), sync=False)
        except Exception:  # noqa: BLE001 - counts that cannot be kept are made again next time, never an error
            pass
        self.changed = False


def _stamp(path: Path) -> list[Any]:
    st = path.stat()
    return [str(path), st.st_size, st.st_mtime_ns]


def policy_overrides(layout: Layout) -> dict[str, Price]:
    """The policy's price rows; none when the policy does not parse (doctor names it, the table still prices)."""
    from majordomus.errors import ContractError
    from majordomus.policy import load_policy
    from majordomus.usage.prices import overrides

    try:
        return overrides(load_policy(layout))
    except ContractError:
        return {}


def short_tokens(n: int) -> str:
    """`950`, `12.3k`, `4.56M`: a column's width."""
    if n < 1000:
        return str(n)
    if n < 1_000_000:
        return f"{n / 1000:.1f}k"
    return f"{n / 1_000_000:.2f}M"


def columns(usage: Usage | None, overrides: dict[str, Price]) -> tuple[str, str]:
    """The `episodes` columns: tokens and cost (`-` where the usage is not counted)."""
    if usage is None or usage.state != "counted":
        return "-", "-"
    return short_tokens(usage.tokens.total), bill(usage, overrides).shown or "$0.0000"
