"""The server process: board, peers, core, HTTP sessions, the reaper, lifetime and the one cleanup path.

Stdio and HTTP both talk to a `Runtime`; it decides when the server has no peer left and stops,
and `shutdown` is the same code whether the last peer left or a signal arrived.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from majordomus import __version__
from majordomus.capabilities.catalogue import default_registry
from majordomus.capabilities.peer_board import PeerBoard
from majordomus.capabilities.registry import Registry, Services
from majordomus.episodes.board import Board, CaptureDriver, CloseReason, Ended, Opened
from majordomus.episodes.sittings import HookSitting, hook_sitting
from majordomus.errors import MajordomusError
from majordomus.layout import Layout
from majordomus.mcp.core import Connection, Core
from majordomus.mcp.lease import LeaseFile

HTTP_IDLE_ENV = "MAJORDOMUS_HTTP_IDLE_SECONDS"
TICK_ENV = "MAJORDOMUS_REAP_INTERVAL_SECONDS"
DEFAULT_HTTP_IDLE_SECONDS = 90.0


def log(message: str) -> None:
    """Diagnostics go to stderr, prefixed; stdout carries protocol frames only."""
    try:
        sys.stderr.write(f"majordomus: {message}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _env_seconds(name: str, default: float) -> float:
    try:
        value = float(os.environ.get(name, ""))
    except ValueError:
        return default
    return value if value > 0 else default


@dataclass(frozen=True)
class Settings:
    grace_seconds: int
    stateless_ttl_seconds: int
    http_idle_seconds: float
    tick_seconds: float

    @classmethod
    def load(cls, layout: Layout) -> Settings:
        from majordomus.policy import cached_values

        values = cached_values(layout)
        grace = values["episodes.reattach_grace_seconds"]
        ttl = values["episodes.stateless_ttl_seconds"]
        idle = _env_seconds(HTTP_IDLE_ENV, DEFAULT_HTTP_IDLE_SECONDS)
        tick = _env_seconds(TICK_ENV, min(30.0, max(0.1, min(grace, ttl, idle) / 4)))
        return cls(grace_seconds=grace, stateless_ttl_seconds=ttl, http_idle_seconds=idle, tick_seconds=tick)


class HttpSurface(Protocol):
    """The HTTP server of a runtime: binds (a taken port is replaced by a free one) and says its URL; stops."""

    def start(self) -> str: ...

    def stop(self) -> None: ...


class _AfterRecovery:
    """Holds every capture call until the start-up reap is done, so the two never race on one episode."""

    def __init__(self, driver: CaptureDriver, ready: threading.Event) -> None:
        self.driver = driver
        self.ready = ready
        self.stopping = threading.Event()  # set at stop: a detach mark no longer waits for the reap

    def open(self, external_id: str, *, resume_only: bool = False) -> Opened:
        self.ready.wait(30)
        return self.driver.open(external_id, resume_only=resume_only)

    def close(self, external_id: str, reason: CloseReason) -> str:
        self.ready.wait(30)
        return self.driver.close(external_id, reason)

    def mark(self, external_id: str, *, held: bool, attachments: int | None = None, bridge: int | None = None
             ) -> None:
        if not self.stopping.is_set():
            self.ready.wait(30)
        self.driver.mark(external_id, held=held, attachments=attachments, bridge=bridge)

    def ended(self, external_id: str) -> Ended | None:
        self.ready.wait(30)
        return self.driver.ended(external_id)


class Runtime:
    """One server process. `url` is None for a standalone server (no HTTP, no lease)."""

    def __init__(self, layout: Layout, settings: Settings, *, lease: LeaseFile | None = None,
                 on_stop: Callable[[], None] | None = None, registry: Registry | None = None) -> None:
        self.layout = layout
        self.settings = settings
        self.lease = lease
        self.on_stop = on_stop
        self.recovered = threading.Event()
        self._driver = _AfterRecovery(CaptureDriver(layout.root), self.recovered)
        self.board = Board(self._driver, settings.grace_seconds, sittings=self._sitting)
        self.peers = PeerBoard()
        self.services = Services(board=self.board, peers=self.peers, layout=layout)
        self.registry = registry or default_registry()
        self.core = Core(self.registry, self.services, self.instructions, __version__)
        self.url: str | None = None
        self.sessions: dict[str, Connection] = {}  # HTTP sessions and bridged stdio connections
        self.own: Connection | None = None
        self.own_left = False
        self.stopping = False
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._http: HttpSurface | None = None
        self._shut = False

    # -- start -----------------------------------------------------------------------------------

    def start(self) -> None:
        """The start-up reap and the periodic reaper, both in the background: stdio answers at once."""
        threading.Thread(target=self._recover, name="majordomus-recover", daemon=True).start()
        threading.Thread(target=self._reaper, name="majordomus-reaper", daemon=True).start()
        if self.lease is not None:  # the shared server alone: the policy's background OTLP export
            self._start_telemetry()

    def _start_telemetry(self) -> None:
        from majordomus.errors import ContractError
        from majordomus.policy import load_policy

        try:
            policy = load_policy(self.layout)
        except ContractError:
            return  # doctor names the policy that does not parse; the export stays off
        if policy.otlp_endpoint is not None:
            threading.Thread(target=self._telemetry, args=(policy.otlp_endpoint, policy.otlp_interval_seconds),
                             name="majordomus-otlp", daemon=True).start()

    def _telemetry(self, endpoint: str, interval: float) -> None:
        """`export --otlp` every `interval` seconds, the first once the start-up reap is done. A refused export
        is a line on stderr; the cursor keeps what was accepted, so the next round sends the rest."""
        from majordomus.telemetry import otlp

        self.recovered.wait(60)
        while not self._stopped.is_set():
            try:
                report = otlp.export(self.layout, otlp.endpoints(endpoint))
                if report.spans or report.logs:
                    log(f"telemetry: sent {report.spans} episode span(s) and {report.logs} prompt log record(s) "
                        f"to {endpoint}")
            except MajordomusError as err:
                log(f"telemetry: {err.message}")
            except Exception as exc:  # noqa: BLE001 - a failed round must not stop the server
                log(f"telemetry: the background export failed once ({type(exc).__name__}: {exc})")
            if self._stopped.wait(interval):
                break

    def _recover(self) -> None:
        try:
            from majordomus.episodes.recover import recover

            for line in recover(self.layout.root, hooks=False):
                log(line)
            self._end_vanished()
        except Exception as exc:  # noqa: BLE001 - a failed reap must not stop the server
            log(f"the start-up reap failed ({type(exc).__name__}: {exc}); run majordomus capture recover")
        finally:
            self.recovered.set()

    def start_http(self, surface: HttpSurface) -> str:
        """Serve HTTP in this process through `surface` (built by the caller: `mcp.http` sits above this module)."""
        self._http = surface
        self.url = surface.start()
        return self.url

    def own_connection(self) -> Connection:
        from majordomus.identity import client_process

        self.own = Connection(transport="stdio", sitting=client_process())
        return self.own

    def _sitting(self, client: str | None, client_name: str | None) -> HookSitting | None:
        """The hook episode an attach of this client comes from (SPEC §4.3: one sitting, one episode)."""
        try:
            return hook_sitting(self.layout, client, client_name)
        except (OSError, MajordomusError) as exc:  # no evidence read: the attach opens its own episode
            log(f"could not look for the sitting's hook episode ({exc}); the attach opens a connection episode")
            return None

    # -- sessions --------------------------------------------------------------------------------

    def open_session(self, *, bridged: bool, sitting: str | None = None, bridge_pid: int | None = None
                     ) -> Connection:
        conn = Connection(transport="stdio" if bridged else "http", bridged=bridged, sitting=sitting,
                          bridge_pid=bridge_pid)
        with self._lock:
            self.sessions[conn.id] = conn
        return conn

    def end_session(self, conn_id: str, why: str) -> bool:
        """DELETE, idle expiry or a failed initialize: the peer detaches; its episode is not closed."""
        with self._lock:
            conn = self.sessions.pop(conn_id, None)
        if conn is None:
            return False
        self._leave(conn)
        self.check_lifetime()
        return True

    def _leave(self, conn: Connection) -> None:
        if conn.peer is not None:
            self.board.detach(conn.peer)
            self.peers.remove(conn.peer)

    def own_client_left(self) -> None:
        """Stdio EOF (or a broken stdout): the own client's episode detaches."""
        if self.own is not None and not self.own_left:
            self.own_left = True
            self._leave(self.own)
            if self.live_peers() and self.url:
                log(f"this stdio client left; serving until the last peer leaves ({self.live_peers()} left)")
            self.check_lifetime()

    def live_peers(self) -> int:
        return len(self.peers)

    def check_lifetime(self) -> None:
        """The server lives while its own client or any peer is attached."""
        if self.own is not None and self.own_left and self.live_peers() == 0 and not self.stopping:
            self.request_stop()

    def request_stop(self) -> None:
        if self.on_stop is not None:
            self.on_stop()

    # -- the reaper ------------------------------------------------------------------------------

    def _reaper(self) -> None:
        while not self._stopped.wait(self.settings.tick_seconds):
            try:
                self.tick()
            except Exception as exc:  # noqa: BLE001 - the reaper must keep running
                log(f"the reaper failed once ({type(exc).__name__}: {exc})")

    def tick(self) -> None:
        """Expire idle HTTP sessions and silent stateless peers, then close what the grace let go."""
        now = time.monotonic()
        with self._lock:
            idle = [cid for cid, c in self.sessions.items() if now - c.last_seen > self.settings.http_idle_seconds]
        for cid in idle:
            self.end_session(cid, "idle")
        for peer in self.peers.stale_handles(self.settings.stateless_ttl_seconds):
            self.board.detach(peer.id)
            self.peers.remove(peer.id)
        if self.recovered.is_set():
            for episode in self.board.reap():
                log(f"episode of {episode['external_id']!r} detached past the grace: {episode['repository']}")
            self._end_vanished()
        self.check_lifetime()

    def _end_vanished(self) -> None:
        """The board reads the episodes too: a hook episode whose client process is gone ends (SPEC 4.4)."""
        from majordomus.episodes.vanished import end_vanished_quietly

        for line in end_vanished_quietly(self.layout):
            log(line)

    # -- words -----------------------------------------------------------------------------------

    def instructions(self, peer_id: str | None) -> str:
        where = (f"the shared MCP server of {self.layout.root} at {self.url} (Swagger UI: {self.url}/swagger)"
                 if self.url else f"the MCP server of {self.layout.root}, serving this client alone")
        lines = [f"majordomus: {where}."]
        if peer_id is not None:
            others = [p.label() for p in self.peers.all() if p.id != peer_id]
            lines.append(f"You are peer {peer_id}. Other peers: {', '.join(others) if others else 'none'}.")
        lines.append("Call majordomus_session_attach with a durable external_id for this sitting (your thread or "
                     "conversation id): the repository then records the episode, and a reconnect resumes it. "
                     "majordomus_session_detach ends it on purpose; majordomus_episodes lists the episodes; "
                     "majordomus_announce says what you work on and answers overlaps with other peers.")
        return " ".join(lines)

    # -- stop ------------------------------------------------------------------------------------

    def shutdown(self) -> None:
        """The one cleanup path: lease removed, every episode detached (none closed), port closed."""
        if self._shut:
            return
        self._shut = True
        self.stopping = True
        # durable first: a client may SIGKILL 3 ms after its SIGTERM (Copilot CLI does), so the detach marks
        # and the lease's removal come before anything that can wait; a mark races the start-up reap safely
        # (both go through the episode's file lock, and a reaped episode has no open file left to mark)
        self._driver.stopping.set()
        releasing = None
        if self.lease is not None:  # the lease's removal beside the marks, not after them: both are file renames
            releasing = threading.Thread(target=self.lease.release, name="majordomus-lease-release")
            releasing.start()
        self.board.close_all()
        if releasing is not None:
            releasing.join()
        self._stopped.set()
        self.recovered.wait(30)  # the start-up reap runs to its end even when the client left at once
        if self._http is not None:
            self._http.stop()
        if self.url:
            log("shared server stopped")
