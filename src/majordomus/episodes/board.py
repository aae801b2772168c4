"""The connection board (SPEC §4.3): connection episodes in memory, keyed by `external_id`.

The board never writes an episode itself: it enters `capture session` in-process exactly as a
hook does (same payload shape, same reader), through a driver. Peers are ids here, nothing more.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from majordomus import ledger
from majordomus.encoded_json import EncodedList, compact
from majordomus.episodes.boundary import set_connection_state
from majordomus.episodes.hook import SessionReport, run_payload
from majordomus.episodes.sittings import HookSitting
from majordomus.episodes.store import CONNECTION_PROVIDER, read_open
from majordomus.errors import MissingError
from majordomus.identity import now_utc, parse_rfc3339, rfc3339, session_key
from majordomus.layout import Layout

CloseReason = Literal["detach", "expired", "shutdown"]
Sittings = Callable[[str | None, str | None], HookSitting | None]  # (client process, client name) → its sitting
State = Literal["open", "detached"]


@dataclass(frozen=True)
class Opened:
    """What capture said to an attach: its report line, verbatim, and whether the open file already names
    this server as the holder (a fresh open writes it in its first write; a kept episode needs the mark)."""

    line: str
    held: bool = False
    kept: bool = False  # the episode was open already (a killed or stopped server's): a resume, not an open
    started_at: str | None = None  # the episode's own start, when capture named it
    attachments: int = 0  # what the open file counted before this attach
    gone: bool = False  # a resume-only attach (a bridge's replay) found no open episode, and opened none


@dataclass(frozen=True)
class Ended:
    """A connection episode's close as the ledger has it: what its detach answered, or would have."""

    external_id: str
    opened_at: str
    closed_at: str
    outcome: str
    reason: str | None
    record: str

    @property
    def line(self) -> str:
        """The report line its close printed (`close_episode`'s own words)."""
        because = f"reason {self.reason}" if self.reason else "no reason given"
        return f"episode closed ({self.outcome}, {because}) into {self.record}"


class Driver(Protocol):
    """The board's one way into the episode record: `capture session --provider generic`."""

    def open(self, external_id: str, *, resume_only: bool = False) -> Opened:
        """Open (or keep) the episode of `external_id`; with `resume_only`, keep it or say it is gone."""

    def close(self, external_id: str, reason: CloseReason) -> str:
        """End the episode of `external_id`; the report line, verbatim."""

    def mark(self, external_id: str, *, held: bool, attachments: int | None = None, bridge: int | None = None
             ) -> None:
        """Record in the open file who holds the episode now (and its attachment count, and the bridge its
        client speaks through), or when it was detached."""

    def ended(self, external_id: str) -> Ended | None:
        """The close of the newest episode of `external_id`, when it is closed; None while open or never seen."""


class CaptureDriver:
    """Calls `majordomus.episodes.boundary` in this process; a failure becomes the sentence."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.layout = Layout(root)  # its paths are joined once

    def _run(self, event: str, payload: dict[str, str], held_by: int | None = None) -> SessionReport | str:
        """The report, or the failure sentence that `repository` then says."""
        try:  # serving must never create .ai/ in someone's tree: run_payload requires the layer first
            report = run_payload(self.root, CONNECTION_PROVIDER, event, payload, held_by=held_by)
        except MissingError:
            return f"no episode was recorded: {self.root} has no majordomus layer; run majordomus init"
        except Exception as exc:  # noqa: BLE001 - the failure sentence is what `repository` says
            return f"no episode was recorded: capture session --event {event} failed: {exc}"
        if not (report.line or "").strip():
            return f"`capture session --event {event}` exited {report.exit_code} and said nothing"
        return report

    def open(self, external_id: str, *, resume_only: bool = False) -> Opened:
        if resume_only and read_open(self.layout, external_id) is None:
            return Opened(f"the episode of {external_id!r} is no longer open; a replayed attach opens none",
                          gone=True)
        report = self._run("start", {"session_id": external_id, "source": "attach"}, held_by=os.getpid())
        if isinstance(report, str):
            return Opened(report)
        drawn = report.drawn
        if drawn is None:
            return Opened(report.line.strip())
        if drawn.opened:
            return Opened(report.line.strip(), held=True, started_at=drawn.started_at)
        found = read_open(self.layout, external_id)
        return Opened(report.line.strip(), kept=True, started_at=drawn.started_at,
                      attachments=found.attachments if found is not None else 0)

    def close(self, external_id: str, reason: CloseReason) -> str:
        report = self._run("end", {"session_id": external_id, "reason": reason})
        return report if isinstance(report, str) else report.line.strip()

    def mark(self, external_id: str, *, held: bool, attachments: int | None = None, bridge: int | None = None
             ) -> None:
        try:  # set_connection_state writes nothing where there is no layer
            if held:
                set_connection_state(self.root, external_id, held_by=os.getpid(), detached_at=None,
                                     attachments=attachments, bridge=bridge)
            else:  # a detach races the client's kill (SIGKILL 3 ms after SIGTERM): no fsync, the rename is enough
                set_connection_state(self.root, external_id, held_by=None, detached_at=rfc3339(now_utc()),
                                     sync=False)
        except Exception:  # noqa: BLE001 - a lost mark only shortens nothing: recover stamps it later
            return

    def ended(self, external_id: str) -> Ended | None:
        key = session_key(external_id)
        started: dict[str, Any] | None = None
        closed: dict[str, Any] | None = None
        for line in ledger.read(self.layout):  # oldest first: the newest start of this id wins
            event = line.get("event")
            named = line.get("provider_session")
            if event == "session.started" and line.get("provider") == CONNECTION_PROVIDER \
                    and isinstance(named, str) and session_key(named) == key:
                started, closed = line, None
            elif event == "session.closed" and started is not None and line.get("session") == started.get("session"):
                closed = line
        if started is None or closed is None:
            return None
        fields = (started.get("ts"), closed.get("ts"), closed.get("outcome"), closed.get("session_path"))
        if not all(isinstance(f, str) and f for f in fields):
            return None
        reason = closed.get("reason")
        return Ended(external_id, str(fields[0]), str(fields[1]), str(fields[2]),
                     reason if isinstance(reason, str) else None, str(fields[3]))


@dataclass
class _Bound:
    """A peer whose attach is a hook episode's sitting: the board answers with it and never writes to it."""

    external_id: str
    sitting: HookSitting
    since: str
    last_activity: float


@dataclass
class _Entry:
    external_id: str
    opened_at: str
    repository: str
    attachments: int
    last_activity: float
    peer: str | None
    detached_since: float | None
    bridge: int | None = None  # the bridge process the holding peer speaks through

    @property
    def state(self) -> State:
        return "open" if self.peer is not None else "detached"


class Board:
    """Attach, touch, detach, close, reap, close_all. Thread-safe.

    Every capture call of one `external_id` runs under that episode's own lock, which guarantees one
    episode per `external_id` without making a heartbeat wait for a disk.
    """

    def __init__(self, driver: Driver, grace_seconds: int, clock: Callable[[], float] = time.monotonic,
                 sittings: Sittings | None = None) -> None:
        self.driver = driver
        self.sittings = sittings
        self.grace_seconds = grace_seconds
        self._clock = clock
        self._lock = threading.RLock()
        self._entries: dict[str, _Entry] = {}
        self._views: dict[str, tuple[tuple[Any, ...], dict[str, Any], str]] = {}  # all()'s, by external id
        self._held: dict[str, str] = {}  # peer → external_id: a connection holds at most one episode
        self._key_locks: dict[str, threading.Lock] = {}
        self._bound: dict[str, _Bound] = {}  # peer → the hook episode its attach named (one sitting, one episode)
        self._gone: dict[str, str] = {}  # peer → the external id its replayed attach found closed meanwhile

    # -- views -------------------------------------------------------------------------------

    def _view(self, entry: _Entry, now: float) -> dict[str, Any]:
        view: dict[str, Any] = {"external_id": entry.external_id, "provider": "generic"}
        if entry.peer is not None:
            view["peer"] = entry.peer
        view["opened_at"] = entry.opened_at
        view["last_activity_seconds_ago"] = max(0, int(now - entry.last_activity))
        view["attachments"] = entry.attachments
        view["state"] = entry.state
        view["repository"] = entry.repository
        return view

    def _bound_view(self, peer: str, bound: _Bound, now: float) -> dict[str, Any]:
        sitting = bound.sitting
        view: dict[str, Any] = {"external_id": bound.external_id, "provider": sitting.provider}
        if sitting.session_id is not None:
            view["session_id"] = sitting.session_id
        view["peer"] = peer
        view["opened_at"] = sitting.started_at or bound.since
        view["last_activity_seconds_ago"] = max(0, int(now - bound.last_activity))
        view["attachments"] = 1
        view["state"] = "open"
        view["repository"] = sitting.line
        return view

    def all(self) -> EncodedList:
        """Every episode on this board, ordered by external id, with its JSON.

        Each entry's view and its JSON fragment are kept until the entry changes or its age passes a second: a
        heartbeat of each of 100 peers lists all 100, and building and encoding the views again each time was most
        of its cost (350 of 1,000 us). The views are shared between answers: read only."""
        with self._lock:
            now = self._clock()
            views, parts = [], []
            for key in sorted(self._entries):
                entry = self._entries[key]
                shown = (entry.peer, entry.opened_at, max(0, int(now - entry.last_activity)), entry.attachments,
                         entry.repository)
                kept = self._views.get(key)
                if kept is None or kept[0] != shown:
                    view = self._view(entry, now)
                    kept = self._views[key] = (shown, view, compact(view))
                views.append(kept[1])
                parts.append(kept[2])
            if len(self._views) > len(self._entries):  # an entry went: its view goes too
                self._views = {key: kept for key, kept in self._views.items() if key in self._entries}
            return EncodedList(views, f"[{','.join(parts)}]")

    def get(self, external_id: str) -> dict[str, Any] | None:
        with self._lock:
            entry = self._entries.get(external_id)
            return None if entry is None else self._view(entry, self._clock())

    def of_peer(self, peer: str) -> dict[str, Any] | None:
        with self._lock:
            bound = self._bound.get(peer)
            if bound is not None:
                return self._bound_view(peer, bound, self._clock())
            key = self._held.get(peer)
            return None if key is None else self._view(self._entries[key], self._clock())

    def counts(self) -> tuple[int, int]:
        with self._lock:
            attached = sum(1 for e in self._entries.values() if e.peer is not None)
            return attached, len(self._entries) - attached

    # -- transitions -------------------------------------------------------------------------------
    #
    # Two kinds of lock: `_lock` guards the maps and is held for memory work only (a heartbeat never
    # waits on a disk); a per-episode lock serialises every capture call of one `external_id`, so an
    # attach and a close of the same episode can never interleave and each id has one episode.

    def _key_lock(self, external_id: str) -> threading.Lock:
        with self._lock:
            return self._key_locks.setdefault(external_id, threading.Lock())

    def _sync_mark(self, external_id: str) -> None:
        """Write the episode's current holder (or its detach time) to its open file, in order per episode."""
        with self._key_lock(external_id):
            with self._lock:
                entry = self._entries.get(external_id)
                if entry is None:
                    return
                held, bridge = entry.peer is not None, entry.bridge
            self.driver.mark(external_id, held=held, **({"bridge": bridge} if held and bridge else {}))

    def attach_from(self, peer: str, external_id: str, *, client: str | None = None, client_name: str | None = None,
                    bridge: int | None = None, replay: bool = False
                    ) -> tuple[dict[str, Any] | None, bool, str | None]:
        """Attach `peer` to the episode of `external_id`: the hook episode of its sitting when evidence names one
        (`client` is the process that spawned the peer, `client_name` what it calls itself), else resume it, or
        open it through capture (a `replay` only resumes: it never opens what its client had not attached).
        Returns the episode (None when the client's hooks keep its episodes and none is open for it, or a
        replay found it gone), whether it was resumed, and the sentence saying the episode comes from hooks."""
        sitting = self.sittings(client, client_name) if self.sittings is not None and (client or client_name) \
            else None
        if sitting is not None:
            return self._bind(peer, external_id, sitting)
        with self._lock:
            self._bound.pop(peer, None)
            self._gone.pop(peer, None)
        if replay:
            return self.resume(peer, external_id, bridge=bridge)
        view, resumed = self.attach(peer, external_id, bridge=bridge)
        return view, resumed, None

    def resume(self, peer: str, external_id: str, *, bridge: int | None = None
               ) -> tuple[dict[str, Any] | None, bool, str | None]:
        """A bridge's replay after failover: resume the episode its client holds, or, when it was closed
        meanwhile, say so and open nothing."""
        done = self._attach(peer, external_id, bridge=bridge, resume_only=True)
        if done is None:
            with self._lock:  # its client may retry a detach the dead server carried out: see `ended`
                self._gone[peer] = external_id
            return None, False, None
        return done[0], done[1], None

    def ended(self, *, peer: str | None = None, external_id: str | None = None
              ) -> tuple[dict[str, Any], Ended] | None:
        """The closed episode a detach finds instead of an open one: the one `peer`'s replayed attach found gone,
        or the one named. Its view, as its close answered it (the attachment count died with its server), and
        how it ended; None when there is none."""
        with self._lock:
            key = self._gone.get(peer) if peer is not None else external_id
        ended = self.driver.ended(key) if key is not None else None
        if ended is None:
            return None
        closed = parse_rfc3339(ended.closed_at)
        ago = max(0, int((now_utc() - closed).total_seconds())) if closed is not None else 0
        return {"external_id": ended.external_id, "provider": CONNECTION_PROVIDER, "opened_at": ended.opened_at,
                "last_activity_seconds_ago": ago, "attachments": 1, "state": "detached",
                "repository": ended.line}, ended

    def _bind(self, peer: str, external_id: str, sitting: HookSitting) -> tuple[dict[str, Any] | None, bool, str]:
        """The attach is a hook sitting: release what the peer held, hold the hook episode (never write it)."""
        released = None
        with self._lock:
            now = self._clock()
            held = self._held.get(peer)
            if held is not None:
                self._release(held, now)
                released = held
            before = self._bound.pop(peer, None)  # naming the same episode again is a resume, not a new bind
            resumed = before is not None and before.external_id == external_id \
                and before.sitting.session_id == sitting.session_id
            view = None
            if sitting.session_id is not None:
                bound = self._bound[peer] = _Bound(external_id, sitting, rfc3339(now_utc()), now)
                view = self._bound_view(peer, bound, now)
        if released is not None:
            self._sync_mark(released)
        return view, resumed, sitting.line

    def attach(self, peer: str, external_id: str, *, bridge: int | None = None) -> tuple[dict[str, Any], bool]:
        """Attach `peer` to the connection episode of `external_id`: resume it, or open it through capture.
        `bridge` is the pid of the bridge process the peer speaks through, if it does."""
        done = self._attach(peer, external_id, bridge=bridge, resume_only=False)
        assert done is not None  # only a resume-only attach finds nothing
        return done

    def _attach(self, peer: str, external_id: str, *, bridge: int | None, resume_only: bool
                ) -> tuple[dict[str, Any], bool] | None:
        released = None
        opened: Opened | None = None
        view: dict[str, Any] | None = None
        with self._key_lock(external_id):
            with self._lock:
                now = self._clock()
                held = self._held.get(peer)
                if held is not None and held != external_id:
                    self._release(held, now)  # a connection holds at most one episode
                    released = held
                entry = self._entries.get(external_id)
                if entry is not None and entry.peer == peer:  # naming it again: a heartbeat, not a resume
                    entry.last_activity = now
                    return self._view(entry, now), True
                if entry is not None:
                    if entry.peer is not None:
                        self._held.pop(entry.peer, None)  # another connection held it: the newest wins
                    entry.peer = peer
                    entry.attachments += 1
                    entry.detached_since = None
                    entry.last_activity = now
                    entry.bridge = bridge
                    self._held[peer] = external_id
                    resumed = True
            if entry is None:
                # outside `_lock`: capture may take a while
                opened = self.driver.open(external_id, resume_only=True) if resume_only else self.driver.open(
                    external_id)
                if not opened.gone:  # a replay of an episode closed meanwhile opens nothing and holds nothing
                    with self._lock:
                        now = self._clock()
                        # a kept episode is what it is: its own start, one more attachment than the file counted
                        entry = _Entry(external_id=external_id, opened_at=opened.started_at or rfc3339(now_utc()),
                                       repository=opened.line, attachments=max(opened.attachments, 1) + 1
                                       if opened.kept else 1, last_activity=now, peer=peer, detached_since=None,
                                       bridge=bridge)
                        self._entries[external_id] = entry
                        stale = self._held.get(peer)
                        if stale is not None and stale != external_id:  # it attached elsewhere meanwhile
                            self._release(stale, now)
                            released = stale
                        self._held[peer] = external_id
                        resumed = opened.kept
            if entry is not None:
                if opened is None or not opened.held or bridge is not None:  # a fresh open wrote its holder
                    self.driver.mark(external_id, held=True, attachments=entry.attachments,
                                     **({"bridge": bridge} if bridge is not None else {}))
                with self._lock:
                    view = self._view(entry, self._clock())
        if released is not None:
            self._sync_mark(released)
        return None if view is None else (view, resumed)

    def touch(self, peer: str) -> None:
        """A heartbeat: in memory only, never a write."""
        with self._lock:
            bound = self._bound.get(peer)
            if bound is not None:
                bound.last_activity = self._clock()
            key = self._held.get(peer)
            if key is not None:
                self._entries[key].last_activity = self._clock()

    def unbind(self, peer: str | None = None, external_id: str | None = None) -> dict[str, Any] | None:
        """Let go of a hook sitting (by its peer, or by the external id its attach named): its view, else None.
        Nothing is written: the client's own end closes a hook episode."""
        with self._lock:
            found = peer if peer in self._bound else next(
                (p for p, b in self._bound.items() if external_id is not None and b.external_id == external_id), None)
            if found is None:
                return None
            view = self._bound_view(found, self._bound.pop(found), self._clock())
            view.pop("peer", None)
            return view

    def detach(self, peer: str) -> list[str]:
        """The connection of `peer` is gone: its episode becomes detached, not closed."""
        with self._lock:
            self._bound.pop(peer, None)  # a hook sitting's episode is the client's: nothing to detach
            self._gone.pop(peer, None)
            key = self._held.get(peer)
            if key is None:
                return []
            self._release(key, self._clock())
        self._sync_mark(key)
        return [key]

    def _release(self, external_id: str, now: float) -> None:
        """In memory, under `_lock`; the caller writes the mark after letting go of it."""
        entry = self._entries[external_id]
        if entry.peer is not None:
            self._held.pop(entry.peer, None)
        entry.peer = None
        entry.detached_since = now

    def close(self, external_id: str, reason: CloseReason) -> dict[str, Any] | None:
        """End the episode through capture; None when this board has no such episode."""
        with self._key_lock(external_id):
            with self._lock:
                entry = self._entries.pop(external_id, None)
                if entry is None:
                    return None
                if entry.peer is not None:
                    self._held.pop(entry.peer, None)
                entry.peer = None
            entry.repository = self.driver.close(external_id, reason)
            with self._lock:  # the key's lock stays: a waiter may hold it already
                return self._view(entry, self._clock())

    def reap(self) -> list[dict[str, Any]]:
        """Close as `expired` (→ interrupted) every episode detached for longer than the grace."""
        with self._lock:
            now = self._clock()
            due = [key for key, e in self._entries.items()
                   if e.detached_since is not None and now - e.detached_since > self.grace_seconds]
        closed = []
        for key in due:
            with self._lock:
                entry = self._entries.get(key)
                still_due = entry is not None and entry.detached_since is not None  # not resumed meanwhile
            if still_due:
                view = self.close(key, "expired")
                if view is not None:
                    closed.append(view)
        return closed

    def close_all(self) -> list[str]:
        """At server stop: detach what is still attached and close nothing (SPEC §4.3).

        Each episode keeps its open file with `detached_at`; its own client can resume it from any
        later server, and otherwise the next start-up reap or `capture recover` closes it as
        interrupted after the grace.
        """
        with self._lock:
            now = self._clock()
            attached = [key for key, e in self._entries.items() if e.peer is not None]
            for key in attached:
                self._release(key, now)
        for key in attached:
            self._sync_mark(key)
        return attached
