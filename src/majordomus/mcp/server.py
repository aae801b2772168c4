"""Entry points: `majordomus mcp`, `majordomus serve`, `majordomus-mcp`; and the stdio client of this process.

The stdio client is served by this process's own runtime (it won the lease, or runs standalone)
or relayed to the shared server by a bridge; when that server dies the bridge elects again and
replays its client's `initialize` and last `majordomus_session_attach`, so the client keeps its
episode without noticing.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from majordomus.errors import MajordomusError, RefusedError, UsageError
from majordomus.layout import Layout
from majordomus.mcp.bridge import Bridge, ServerGone, SessionLost
from majordomus.mcp.core import INVALID_REQUEST, RpcError, encode, error_response
from majordomus.mcp.lease import Claimed, Lease, LeaseFile
from majordomus.mcp.runtime import Runtime, Settings, log
from majordomus.mcp.stdio import TOO_LARGE, FrameWriter, claim_stdout, read_frames

DEFAULT_PORT = 8741
USAGE = """Usage: majordomus mcp [--http-port N] [--http-host H] [--standalone]

Speak MCP over stdio (one JSON message per line) and join this repository's one shared server:
the first process binds the loopback HTTP server (/mcp, /api/v1, /openapi.json, /swagger) and
writes the lease .ai/local/state/mcp/server.json; later processes bridge their stdio to it.

  --http-port N   port of the shared server (default 8741; 0 = any free port; a taken port is replaced)
  --http-host H   address to bind (default $MAJORDOMUS_HTTP_HOST, else 127.0.0.1)
  --standalone    serve this client alone: no port, no lease, no URL
"""
SERVE_USAGE = """Usage: majordomus serve [--http-port N] [--http-host H]

Run this repository's shared server without a stdio client of its own, until SIGTERM or Ctrl+C.
"""


def _options(argv: list[str], usage: str, *, standalone_allowed: bool) -> dict[str, Any]:
    opts: dict[str, Any] = {"port": DEFAULT_PORT, "host": os.environ.get("MAJORDOMUS_HTTP_HOST") or "127.0.0.1",
                            "standalone": False, "help": False}
    words = list(argv)
    while words:
        word = words.pop(0)
        name, eq, inline = word.partition("=")
        if word in ("-h", "--help"):
            opts["help"] = True
        elif word == "--standalone" and standalone_allowed:
            opts["standalone"] = True
        elif name in ("--http-port", "--http-host"):
            value = inline if eq else (words.pop(0) if words else None)
            if value is None:
                raise UsageError(f"{name} needs a value", f"try 'majordomus {usage.split()[2]} --help'")
            if name == "--http-port":
                if not value.isdigit() or int(value) > 65535:
                    raise UsageError(f"--http-port must be a port number (0 for any free port), not {value!r}")
                opts["port"] = int(value)
            else:
                opts["host"] = value
        else:
            raise UsageError(f"unknown option {word!r}", f"try 'majordomus {usage.split()[2]} --help'")
    return opts


def _on_signals(handler: Callable[[], None]) -> Callable[[], None]:
    """SIGTERM, SIGINT and SIGHUP all run the same cleanup; returns a function restoring the old handlers."""
    previous: dict[int, Any] = {}
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        previous[sig] = signal.signal(sig, lambda _n, _f: handler())

    def restore() -> None:
        for sig, old in previous.items():
            signal.signal(sig, old)

    return restore


def _surfaces_line(url: str) -> str:
    surfaces = [("mcp", "/mcp"), ("swagger", "/swagger"), ("openapi", "/openapi.json"), ("api", "/api/v1"),
                ("live", "/api/v1/live"), ("ready", "/api/v1/ready"), ("home", "/")]
    return (f"shared server listening on {url} — {len(surfaces)} surface(s): "
            + ", ".join(f"{name} {url}{path}" for name, path in surfaces))


def start_shared(layout: Layout, settings: Settings, host: str, port: int, on_stop: Callable[[], None],
                 *, own_client: bool) -> Runtime | Lease:
    """Elect; when this process wins, bind, publish the URL and serve; else the lease of the live server."""
    lease = LeaseFile(layout, log)
    result = lease.elect()
    if not isinstance(result, Claimed):
        return result.lease
    rt = Runtime(layout, settings, lease=lease, on_stop=on_stop)
    try:
        from majordomus.mcp.http import HttpServer  # Starlette and uvicorn: only for the process that serves

        url = rt.start_http(HttpServer(rt, host, port))
    except OSError:
        lease.release()
        raise
    if port and not url.endswith(f":{port}"):
        log(f"port {port} is taken; the shared server takes a free port instead")
    lease.publish(url)
    rt.start()
    if own_client:
        rt.own_connection()
    log(_surfaces_line(url))
    return rt


class StdioClient:
    """The stdio client of this process and whatever serves it: the local runtime or a bridge."""

    def __init__(self, layout: Layout, opts: dict[str, Any], writer: FrameWriter, done: threading.Event) -> None:
        self.layout = layout
        self.opts = opts
        self.writer = writer
        self.done = done
        self.settings = Settings.load(layout)
        self.runtime: Runtime | None = None
        self.bridge: Bridge | None = None
        self.saved_initialize: bytes | None = None
        self.saved_attach: bytes | None = None
        self.left = False
        self._lock = threading.RLock()

    # -- who serves ------------------------------------------------------------------------------

    def begin(self) -> None:
        if self.opts["standalone"]:
            self._serve_alone()
        elif not self.layout.is_initialised():
            log("cannot use the shared server: this repository has no majordomus layer; serving this client "
                "alone (run majordomus init to share one server)")
            self._serve_alone()
        else:
            self._elect()
        threading.Thread(target=self._keepalive, name="majordomus-keepalive", daemon=True).start()

    def _serve_alone(self) -> None:
        self.runtime = Runtime(self.layout, self.settings, on_stop=self.done.set)
        self.runtime.start()
        self.runtime.own_connection()

    def _elect(self) -> None:
        try:
            rt = start_shared(self.layout, self.settings, self.opts["host"], self.opts["port"], self.done.set,
                              own_client=True)
        except (MajordomusError, OSError) as exc:
            log(f"cannot use the shared server ({exc}); serving this client alone")
            self._serve_alone()
            return
        if isinstance(rt, Runtime):
            self.runtime, self.bridge = rt, None
            return
        assert rt.url is not None
        self.bridge = Bridge(rt.url, rt.token)
        log(f"a shared server (pid {rt.pid}) serves this repository at {rt.url}; bridging this stdio session to it")

    def _reelect(self) -> None:
        log("the shared server is gone; electing again")
        if self.bridge is not None:
            self.bridge.session_id = None
        self.bridge = None
        self._elect()
        if self.runtime is not None:
            log("re-attached to the shared server (this process serves it now)")
        elif self.bridge is not None:
            log(f"re-attached to the shared server at {self.bridge.url}")
        self._replay()

    # -- frames ----------------------------------------------------------------------------------

    def handle(self, frame: bytes) -> None:
        with self._lock:
            out = self._relay(frame)
            # after the relay: a frame that meets a dead server is relayed after the replay of what came before
            # it (a detach must find its episode resumed first), so it is remembered only once it has gone through
            self._remember(frame)
        if out is not None and not self.writer.write(out):
            self.eof()  # a broken pipe on stdout ends the session like EOF

    def _remember(self, frame: bytes) -> None:
        """What a new server must hear again: the client's initialize and its last attach."""
        try:
            message = json.loads(frame)
        except (ValueError, RecursionError):
            return
        if not isinstance(message, dict):
            return
        method = message.get("method")
        if method == "initialize":
            self.saved_initialize = frame
        elif method == "tools/call" and isinstance(message.get("params"), dict):
            name = message["params"].get("name")
            if name == "majordomus_session_attach":
                self.saved_attach = frame
            elif name == "majordomus_session_detach":
                self.saved_attach = None

    def _relay(self, frame: bytes) -> bytes | None:
        if frame == TOO_LARGE:
            reply = error_response(None, RpcError(INVALID_REQUEST, "message too large: at most 4 MiB per frame"))
            return encode(reply.body) if reply.body else None
        for _ in range(3):
            if self.runtime is not None:
                assert self.runtime.own is not None
                reply = self.runtime.core.handle_bytes(frame, self.runtime.own)
                return encode(reply.body) if reply.body else None
            if self.bridge is None:
                break
            try:
                return self.bridge.send(frame)
            except SessionLost:
                recovered = self._recover(gone=False)
            except ServerGone:
                recovered = self._recover(gone=True)
            if not recovered:
                break
        return _unreachable(frame)  # a request is always answered, if only with why it could not be

    def _recover(self, *, gone: bool) -> bool:
        """After a relay that failed: elect again (`gone`) or open a new session, then replay. The server found may
        die in its turn before the replay is through (a soak killed two lease holders within a second: the
        client's request went unanswered for good): then elect again, at most three times. Whether a server
        now serves this client."""
        for _ in range(3):
            try:
                if gone:
                    self._reelect()
                else:
                    self._replay()
                return True
            except SessionLost:
                gone = False
            except ServerGone:
                gone = True
        return False

    def _replay(self) -> None:
        """Initialise the new connection as the client did, then resume its episode (answers discarded)."""
        frames = [f for f in (self.saved_initialize, b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
                              if self.saved_initialize else None, self.saved_attach) if f]
        for frame in frames:
            if self.runtime is not None:
                own = self.runtime.own
                assert own is not None
                own.replaying = True  # a replayed attach resumes its episode and never opens one
                try:
                    self.runtime.core.handle_bytes(frame, own)
                finally:
                    own.replaying = False
            elif self.bridge is not None:
                self.bridge.send(frame, replay=True)

    def _keepalive(self) -> None:
        interval = max(0.2, self.settings.http_idle_seconds / 3)
        while not self.done.wait(interval):
            with self._lock:
                if self.left or self.bridge is None:
                    continue
                try:
                    self.bridge.keepalive()
                except SessionLost:
                    self._recover(gone=False)
                except ServerGone:
                    self._recover(gone=True)

    def eof(self) -> None:
        with self._lock:
            if self.left:
                return
            self.left = True
            if self.runtime is not None:
                self.runtime.own_client_left()
            else:
                if self.bridge is not None:
                    self.bridge.close()
                self.done.set()

    def finish(self) -> None:
        """The one cleanup path, after EOF or a signal."""
        with self._lock:
            if self.runtime is not None:
                self.runtime.shutdown()
            elif self.bridge is not None:
                self.bridge.close()


def _unreachable(frame: bytes) -> bytes | None:
    try:
        message = json.loads(frame)
    except (ValueError, RecursionError):
        message = None
    request_id = message.get("id") if isinstance(message, dict) else None
    if isinstance(message, dict) and "id" not in message:
        return None
    reply = error_response(request_id if isinstance(request_id, (str, int)) else None,
                           RpcError(-32603, "the shared server cannot be reached; restart the MCP server"))
    return encode(reply.body) if reply.body else None


def run_mcp(root: Path, opts: dict[str, Any]) -> int:
    layout = Layout(root)
    writer = FrameWriter(claim_stdout())
    done = threading.Event()
    restore = _on_signals(done.set)
    client = StdioClient(layout, opts, writer, done)
    try:
        client.begin()

        def pump() -> None:
            try:
                for frame in read_frames(0):
                    try:
                        client.handle(frame)
                    except Exception as exc:  # noqa: BLE001 - one bad frame must never end the session
                        log(f"a frame could not be handled ({type(exc).__name__}: {exc}); still serving")
                    if writer.closed:
                        break
            finally:
                client.eof()

        threading.Thread(target=pump, name="majordomus-stdio", daemon=True).start()
        while not done.wait(1.0):
            pass
    finally:
        client.finish()
        restore()
    return 0


def mcp_main(root: Path, argv: list[str]) -> int:
    opts = _options(argv, USAGE, standalone_allowed=True)
    if opts["help"]:
        sys.stdout.write(USAGE)
        return 0
    return run_mcp(root, opts)


def serve_main(root: Path, argv: list[str]) -> int:
    opts = _options(argv, SERVE_USAGE, standalone_allowed=False)
    if opts["help"]:
        sys.stdout.write(SERVE_USAGE)
        return 0
    layout = Layout(root)
    if not layout.is_initialised():
        from majordomus.errors import MissingError

        raise MissingError(f"{root} has no majordomus layer", "run majordomus init")
    done = threading.Event()
    restore = _on_signals(done.set)
    try:
        rt = start_shared(layout, Settings.load(layout), opts["host"], opts["port"], done.set, own_client=False)
        if not isinstance(rt, Runtime):
            raise RefusedError(f"a shared server (pid {rt.pid}) already serves this repository at {rt.url}",
                               "use it, or stop it first")
        try:
            while not done.wait(1.0):
                pass
        finally:
            rt.shutdown()
    finally:
        restore()
    return 0


def console_main() -> int:
    """`majordomus-mcp [--repo ROOT] [mcp options]`: the same server as `majordomus mcp`."""
    from majordomus.identity import find_root

    argv = sys.argv[1:]
    repo: str | None = None
    if argv and argv[0] == "--repo":
        if len(argv) < 2:
            sys.stderr.write("majordomus: --repo needs a directory\n")
            return 2
        repo, argv = argv[1], argv[2:]
    elif argv and argv[0].startswith("--repo="):
        repo, argv = argv[0].split("=", 1)[1], argv[1:]
    try:
        if "-h" in argv or "--help" in argv:
            return mcp_main(Path(repo or "."), argv)
        root = find_root(Path(repo) if repo else Path.cwd())
        return mcp_main(root, argv)
    except MajordomusError as err:
        sys.stderr.write(err.line() + "\n")
        return err.exit_code
