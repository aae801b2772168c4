"""HTTP surfaces: `/`, `/mcp`, `/api/v1/*`, `/openapi.json`, `/swagger`; the guard in front of all of them.

The only module with Starlette and uvicorn in it. Uvicorn runs in a thread of this process without
signal handlers of its own: the process's signal handling runs the one cleanup path.

Every request passes the `Guard` first: the Host must name this server as the request reached it (421),
an Origin must be exactly this server's (403), the owner's token must be there (401; `/api/v1/live`
excepted), and the body is read by the guard itself, bounded while it is read (413, Content-Length
first) and within the read deadline (408). A request head that never completes is cut at the same
deadline by the protocol class below.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import os
import re
import socket
import threading
import time
from importlib import resources
from typing import TYPE_CHECKING, Any

import anyio.to_thread
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from majordomus import __version__
from majordomus.capabilities import projections
from majordomus.capabilities.registry import Caller, Capability, invoke
from majordomus.capabilities.validate import from_query
from majordomus.mcp.core import (
    HANDSHAKE_VERSIONS,
    INVALID_PARAMS,
    INVALID_REQUEST,
    MAX_FRAME_BYTES,
    MODERN_VERSIONS,
    PROTOCOL_VERSION_KEY,
    Connection,
    RpcError,
    encode,
    error_response,
    parse,
)

if TYPE_CHECKING:
    from majordomus.mcp.runtime import Runtime

LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "[::1]"})
WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", "[::]", ""})
LEASE_PATH = ".ai/local/state/mcp/server.json"
READ_DEADLINE_ENV = "MAJORDOMUS_HTTP_READ_DEADLINE_SECONDS"
DEFAULT_READ_DEADLINE_SECONDS = 30.0  # REFERENCE: read_deadline_seconds
KEEP_ALIVE_SECONDS = 15
BODY_LIMIT = MAX_FRAME_BYTES  # 4 MiB: REST and /mcp alike
MAX_DEPTH = 64  # nesting of a JSON body (arrays and objects)
TOO_DEEP = f"the body is nested deeper than {MAX_DEPTH} levels: send the arguments as a flatter JSON object"
OPEN_PATHS = frozenset({"/api/v1/live"})  # the only path without the token: a bridge probes it before trusting
UNAUTHORIZED = ("this server answers its repository's owner only: send Authorization: Bearer <token>, with the "
                f"token from {LEASE_PATH} (readable by the owner alone; a new server writes a new one)")
_NAME = r"(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*|\[[0-9a-f:.]+\])"
_HOST = re.compile(rf"(?P<name>{_NAME})(?::(?P<port>[0-9]{{1,5}}))?", re.IGNORECASE)
_ORIGIN = re.compile(rf"(?P<scheme>[a-z][a-z0-9+.-]*)://(?P<name>{_NAME})(?::(?P<port>[0-9]{{1,5}}))?",
                     re.IGNORECASE)
SWAGGER_FILES = {"swagger-ui-bundle.js": "text/javascript", "swagger-ui.css": "text/css",
                 "init.js": "text/javascript", "LICENSE": "text/plain"}
SWAGGER_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>majordomus API</title>
<link rel="stylesheet" href="/swagger/swagger-ui.css"></head>
<body><div id="swagger-ui"></div>
<script src="/swagger/swagger-ui-bundle.js"></script><script src="/swagger/init.js"></script>
</body></html>
"""


def read_deadline() -> float:
    """Seconds a request may take to arrive whole (head and body): `MAJORDOMUS_HTTP_READ_DEADLINE_SECONDS`."""
    try:
        value = float(os.environ.get(READ_DEADLINE_ENV, ""))
    except ValueError:
        return DEFAULT_READ_DEADLINE_SECONDS
    return value if 0 < value < 3600 else DEFAULT_READ_DEADLINE_SECONDS


def _json(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(json.dumps(body).encode(), status_code=status, headers=headers, media_type="application/json")


def _problem(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> Response:
    return _json(projections.error_body(code, message), status, headers)


def is_loopback(host: str | None) -> bool:
    """An address (or `localhost`) that only this machine reaches."""
    if host is None:
        return False
    host = host.strip("[]").lower()
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return bool((mapped or address).is_loopback)


def _shown(address: str) -> str:
    return f"[{address}]" if ":" in address else address


def json_depth(value: Any) -> int:
    """How deep arrays and objects nest in a decoded JSON value (iterative: no recursion to exhaust)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (list, dict)):
            deepest = max(deepest, depth)
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


class _Refused(Exception):
    def __init__(self, response: Response) -> None:
        self.response = response


class Guard:
    """In front of every surface: Host (421), Origin (403), the owner's token (401), a bounded, deadlined body.

    `names` are the host names this server answers to besides the address a request reached: the
    loopback names for a request that reached a loopback address, the bound `--http-host` when it is a
    name or a specific address. A wildcard bind (0.0.0.0) adds nothing: a request from another machine
    must then name the address it reached, and `Host: localhost` is only for requests over loopback.
    """

    def __init__(self, app: ASGIApp, token: str, *, names: frozenset[str] = frozenset(),
                 limit: int = BODY_LIMIT, deadline: float | None = None) -> None:
        self.app = app
        self.token = f"Bearer {token}".encode()
        self.names = frozenset(n.lower() for n in names)
        self.limit = limit
        self.deadline = deadline if deadline is not None else read_deadline()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.monotonic()
        headers: dict[str, str] = {}
        for key, value in scope["headers"]:
            name = key.decode("latin-1").lower()
            # a repeated Host, Origin or Authorization is refused below as not ours: never pick one of two
            headers[name] = "\0" if name in headers and name in ("host", "origin", "authorization") \
                else value.decode("latin-1")
        try:
            self._check_host(scope, headers)
            self._check_token(scope, headers)
            body = await self._read_body(scope, headers, receive, started)
        except _Refused as refused:
            await refused.response(scope, receive, send)
            return
        if body is None:
            return  # the client went away before its body was whole: nothing to answer
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    # -- Host and Origin -------------------------------------------------------------------------

    def _allowed(self, scope: Scope) -> tuple[frozenset[str], int | None]:
        server = scope.get("server")
        address, port = (str(server[0]), int(server[1])) if server else ("127.0.0.1", None)
        names = set(self.names)
        if is_loopback(address):
            names |= LOOPBACK_NAMES
        names.add(_shown(address).lower())
        return frozenset(names), port

    def _names_us(self, name: str, port: str | None, allowed: frozenset[str], ours: int | None) -> bool:
        return name.lower() in allowed and (port is None or ours is None or int(port) == ours)

    def _check_host(self, scope: Scope, headers: dict[str, str]) -> None:
        allowed, port = self._allowed(scope)
        host = _HOST.fullmatch(headers.get("host", ""))
        if host is None or not self._names_us(host["name"], host["port"], allowed, port):
            raise _Refused(_problem(421, "misdirected", "this server answers to the host names of its own "
                                                        "address only (127.0.0.1 or localhost over loopback); "
                                                        "the Host header names another"))
        origin = headers.get("origin")
        if origin is None:
            return
        parts = _ORIGIN.fullmatch(origin)
        # exact: http (this server speaks no TLS), one of our names, our port (absent means 80)
        if parts is None or parts["scheme"].lower() != "http" or \
                not self._names_us(parts["name"], parts["port"] or "80", allowed, port):
            raise _Refused(_problem(403, "forbidden", "cross-origin requests are refused: only a page served by "
                                                      "this server itself may drive it"))

    # -- the owner's token -----------------------------------------------------------------------

    def _check_token(self, scope: Scope, headers: dict[str, str]) -> None:
        if scope["path"] in OPEN_PATHS:
            return
        given = headers.get("authorization", "")
        scheme, _, value = given.partition(" ")
        candidate = f"Bearer {value.strip()}".encode("latin-1") if scheme.lower() == "bearer" else b""
        if not hmac.compare_digest(candidate, self.token):
            raise _Refused(_problem(401, "unauthorized", UNAUTHORIZED,
                                    {"WWW-Authenticate": 'Bearer realm="majordomus"'}))

    # -- the body --------------------------------------------------------------------------------

    def _body_problem(self, scope: Scope, status: int, code: str, message: str) -> _Refused:
        close = {"Connection": "close"}
        if scope["path"] == "/mcp":
            reply = error_response(None, RpcError(INVALID_REQUEST, message, status=status))
            assert reply.body is not None
            return _Refused(Response(encode(reply.body), status_code=status, headers=close,
                                     media_type="application/json"))
        return _Refused(_problem(status, code, message, close))

    async def _read_body(self, scope: Scope, headers: dict[str, str], receive: Receive,
                         started: float) -> bytes | None:
        too_large = (f"the body is larger than {self.limit} bytes ({self.limit // (1024 * 1024)} MiB), the most "
                     "this server reads: send a smaller one")
        declared = headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            raise self._body_problem(scope, 413, "too_large", too_large)
        chunks: list[bytes] = []
        size = 0
        while True:
            remaining = started + self.deadline - time.monotonic()
            try:
                if remaining <= 0:
                    raise TimeoutError
                message = await asyncio.wait_for(receive(), remaining)
            except (TimeoutError, asyncio.TimeoutError):
                raise self._body_problem(scope, 408, "timeout", f"the request did not arrive whole within "
                                                                f"{self.deadline:g} s: send it at once") from None
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                raise self._body_problem(scope, 413, "too_large", too_large)
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)


def _is_json(request: Request) -> bool:
    return request.headers.get("content-type", "").split(";")[0].strip().lower() == "application/json"


def _loopback(request: Request) -> bool:
    return is_loopback(request.client.host if request.client else None)


def _is_modern(message: Any) -> bool:
    params = message.get("params") if isinstance(message, dict) else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and PROTOCOL_VERSION_KEY in meta


def _is_process_name(text: str) -> bool:
    """`<pid>@<start ticks>`, as a bridge names its client process."""
    pid, at, ticks = text.partition("@")
    return bool(at) and len(text) <= 41 and pid.isascii() and pid.isdigit() and ticks.isascii() and ticks.isdigit()


def build_app(rt: Runtime) -> Starlette:
    """Every surface of one runtime."""
    registry = rt.registry

    def _is_command(message: dict[str, Any]) -> bool:
        """Commands may wait on capture, and a blocking query reads the disk: they run in a worker thread; other
        queries answer on the loop."""
        params = message.get("params")
        name = params.get("name") if isinstance(params, dict) else None
        cap = registry.by_tool(name) if isinstance(name, str) else None
        return cap is None or cap.kind == "command" or cap.blocking

    def surfaces() -> dict[str, str]:
        base = rt.url or ""
        return {"home": f"{base}/", "mcp": f"{base}/mcp", "api": f"{base}/api/v1", "openapi": f"{base}/openapi.json",
                "swagger": f"{base}/swagger", "live": f"{base}/api/v1/live", "ready": f"{base}/api/v1/ready"}

    async def home(request: Request) -> Response:
        from majordomus.identity import repository_id, worktree_id

        return _json({"name": "majordomus", "version": __version__, "root": str(rt.layout.root),
                      "repository_id": repository_id(rt.layout.root), "worktree_id": worktree_id(rt.layout.root),
                      "leaseholder": rt.lease.mine.pid if rt.lease and rt.lease.mine else None,
                      "surfaces": surfaces(),
                      "capabilities": [{"id": c.id, "tool": c.tool,
                                        "http": f"{c.http.method} {c.http.path}" if c.http else None}
                                       for c in registry]})

    async def live(request: Request) -> Response:
        lease = rt.lease.mine if rt.lease else None
        return _json({"live": True, "pid": rt_pid, "lease": lease.digest if lease else None,
                      "stopping": rt.stopping})

    async def ready(request: Request) -> Response:
        from majordomus.identity import repository_id, tree_state

        state = await anyio.to_thread.run_sync(tree_state, rt.layout.root)
        attached, detached = rt.board.counts()
        return _json({"ready": not rt.stopping and rt.recovered.is_set(), "root": str(rt.layout.root),
                      "repository_id": repository_id(rt.layout.root), "branch": state.branch, "commit": state.head,
                      "dirty": state.working_tree == "dirty", "peers": rt.live_peers(),
                      "episodes": {"open": attached, "detached": detached}},
                     200 if not rt.stopping else 503)

    async def openapi(request: Request) -> Response:
        return _json(projections.openapi(registry, __version__, rt.url))

    async def swagger(request: Request) -> Response:
        return Response(SWAGGER_PAGE, media_type="text/html")

    async def swagger_asset(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in SWAGGER_FILES:  # a fixed list: no path from the request ever reaches the filesystem
            return _problem(404, "not_found", f"no asset {name!r} here")
        data = resources.files("majordomus.mcp").joinpath("swagger", name).read_bytes()
        return Response(data, media_type=SWAGGER_FILES[name], headers={"Cache-Control": "max-age=86400"})

    async def mcp_post(request: Request) -> Response:
        if not _is_json(request):
            return _rpc_error(None, RpcError(INVALID_REQUEST, "a POST to /mcp carries one JSON-RPC message as "
                                                              "application/json", status=415))
        try:
            message = parse(await request.body())
        except RpcError as exc:
            return _rpc_error(None, exc)
        is_dict = isinstance(message, dict)
        request_id = message.get("id") if is_dict else None
        if json_depth(message) > MAX_DEPTH:
            return _rpc_error(request_id, RpcError(INVALID_REQUEST, f"Invalid Request: {TOO_DEEP}", status=400))
        headers = request.headers
        session_id = headers.get("mcp-session-id")
        bridged = headers.get("x-majordomus-bridge") == "1"
        modern = _is_modern(message)
        if not modern and not bridged and headers.get("mcp-protocol-version") in MODERN_VERSIONS and is_dict \
                and "id" in message and message.get("method") != "initialize":
            # 2026-07-28 (basic/index): a request missing a required _meta field is malformed: -32602, HTTP 400
            return _rpc_error(request_id, RpcError(INVALID_PARAMS, "Invalid params: a 2026-07-28 request carries "
                                                   f"params._meta with {PROTOCOL_VERSION_KEY!r} and "
                                                   "'io.modelcontextprotocol/clientCapabilities'", status=400))
        conn: Connection | None = None
        new: Connection | None = None
        if session_id:
            conn = rt.sessions.get(session_id)
            if conn is None and not (modern and not bridged):
                return _rpc_error(request_id, RpcError(INVALID_REQUEST, f"session_not_found: no session "
                                                       f"{session_id[:64]!r} here (it ended or expired); "
                                                       "send initialize again", status=404))
            if conn is not None and modern and not conn.bridged:
                conn = None  # 2026-07-28 ignores Mcp-Session-Id: the request stands alone
        elif bridged or (is_dict and message.get("method") == "initialize"):
            if rt.stopping:
                return _rpc_error(request_id, RpcError(INVALID_REQUEST, "the shared server is stopping; "
                                                       "elect a new one", status=503))
            sitting = headers.get("x-majordomus-client") if bridged else None
            if sitting is not None and not _is_process_name(sitting):
                return _rpc_error(request_id, RpcError(INVALID_REQUEST, "X-Majordomus-Client names the bridged "
                                                       "client's process as <pid>@<start ticks> (digits only); "
                                                       "leave the header out when it cannot be read", status=400))
            bridge_pid = headers.get("x-majordomus-bridge-pid") if bridged else None
            if bridge_pid is not None and not (bridge_pid.isascii() and bridge_pid.isdigit() and len(bridge_pid) <= 10
                                               and int(bridge_pid) > 0):
                return _rpc_error(request_id, RpcError(INVALID_REQUEST, "X-Majordomus-Bridge-Pid names the bridge "
                                                       "process by its pid (digits only); leave the header out "
                                                       "when it is not a bridge", status=400))
            conn = new = rt.open_session(bridged=bridged, sitting=sitting,
                                         bridge_pid=int(bridge_pid) if bridge_pid else None)
        elif not modern and is_dict and "id" in message and "method" in message:
            return _rpc_error(request_id, RpcError(INVALID_REQUEST, "session_required: send initialize first and "
                                                   "echo its Mcp-Session-Id, or carry the protocol version in "
                                                   f"params._meta ({PROTOCOL_VERSION_KEY})", status=400))
        if conn is not None and not conn.bridged and conn.version and not modern:
            version = headers.get("mcp-protocol-version")
            if version is not None and version not in HANDSHAKE_VERSIONS:
                return _rpc_error(request_id, RpcError(INVALID_REQUEST, f"MCP-Protocol-Version {version[:32]!r} "
                                                       "is not one this server speaks", status=400))
        check = None if conn is not None and conn.bridged else headers
        loopback = _loopback(request)
        replaying = conn is not None and conn.bridged and headers.get("x-majordomus-replay") == "1"
        if replaying:
            assert conn is not None
            conn.replaying = True  # a bridge's frames come one at a time: this one is its replay after failover
        try:
            if is_dict and message.get("method") == "tools/call" and _is_command(message):
                reply = await anyio.to_thread.run_sync(lambda: rt.core.handle(message, conn, headers=check,
                                                                              loopback=loopback))
            else:
                reply = rt.core.handle(message, conn, headers=check, loopback=loopback)
        finally:
            if replaying:
                assert conn is not None
                conn.replaying = False
        if new is not None and not bridged and (reply.body is None or "error" in reply.body):
            rt.end_session(new.id, "failed initialize")
            new = None
        if reply.body is None:
            response = Response(status_code=202)
        else:
            response = Response(encode(reply.body), status_code=reply.status, media_type="application/json")
        if new is not None:
            response.headers["mcp-session-id"] = new.id
        return response

    async def mcp_delete(request: Request) -> Response:
        session_id = request.headers.get("mcp-session-id")
        if not session_id:
            return _problem(400, "invalid_input", "DELETE /mcp needs the Mcp-Session-Id of the session to end")
        if not rt.end_session(session_id, "delete"):
            return _problem(404, "not_found", "no such session here (it ended or expired)")
        return Response(status_code=204)

    async def mcp_get(request: Request) -> Response:
        return Response(status_code=405, headers={"Allow": "POST, DELETE"})

    def capability_endpoint(cap: Capability) -> Any:
        async def endpoint(request: Request) -> Response:
            if request.method == "GET":
                args: Any = from_query(cap.input_schema, dict(request.query_params))
            else:
                if not _is_json(request):
                    return _problem(415, "unsupported_media_type", "send the arguments as an application/json "
                                                                   "object (Content-Type: application/json)")
                raw = await request.body()
                try:
                    args = json.loads(raw) if raw.strip() else {}
                except RecursionError:
                    return _problem(400, "invalid_input", TOO_DEEP)
                except ValueError:
                    return _problem(400, "invalid_input", "the body is not JSON: send the arguments as one object")
                if json_depth(args) > MAX_DEPTH:
                    return _problem(400, "invalid_input", TOO_DEEP)
                if not isinstance(args, dict):
                    return _problem(400, "invalid_input", "the body must be a JSON object of arguments")
            caller = Caller(via="http", loopback=_loopback(request))
            if cap.kind == "command" or cap.blocking:
                outcome = await anyio.to_thread.run_sync(invoke, cap, rt.services, caller, args)
            else:
                outcome = invoke(cap, rt.services, caller, args)
            status, body = projections.http_result(outcome)
            return _json(body, status)

        return endpoint

    rt_pid = os.getpid()
    routes = [
        Route("/", home, methods=["GET"]),
        Route("/mcp", mcp_post, methods=["POST"]),
        Route("/mcp", mcp_delete, methods=["DELETE"]),
        Route("/mcp", mcp_get, methods=["GET"]),
        Route("/api/v1/live", live, methods=["GET"]),
        Route("/api/v1/ready", ready, methods=["GET"]),
        Route("/openapi.json", openapi, methods=["GET"]),
        Route("/swagger", swagger, methods=["GET"]),
        Route("/swagger/{name}", swagger_asset, methods=["GET"]),
    ]
    for cap in registry.routes():
        assert cap.http is not None
        routes.append(Route(cap.http.path, capability_endpoint(cap), methods=[cap.http.method]))
    async def internal(request: Request, exc: Exception) -> Response:
        return _problem(500, "internal", f"the server failed on this request ({type(exc).__name__}); it keeps "
                                         "serving: try again, and report it if it repeats")

    return Starlette(routes=routes, exception_handlers={Exception: internal})


def _rpc_error(request_id: Any, error: RpcError) -> Response:
    reply = error_response(request_id if isinstance(request_id, (str, int)) else None, error)
    assert reply.body is not None
    return Response(encode(reply.body), status_code=reply.status, media_type="application/json")


def bind(host: str, port: int) -> socket.socket:
    """Bind `port`, or any free port when it is taken (or 0)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    for candidate in ((port, 0) if port else (0,)):
        # proto must say TCP: asyncio sets TCP_NODELAY on accepted sockets only then (else Nagle adds 40 ms).
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, candidate))
        except OSError:
            sock.close()
            continue
        sock.listen(128)
        sock.set_inheritable(False)
        return sock
    raise OSError(f"cannot bind {host}")


def deadlined_protocol(deadline: float) -> type[Any]:
    """Uvicorn's h11 protocol with a deadline on the request head: uvicorn arms no timer until a first response
    is complete, so a connection that never finishes its head (slowloris) was held forever. From the connection
    (or the end of the previous response) a whole head must arrive within `deadline`; the body is the Guard's."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class Deadlined(H11Protocol):
        _head_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def _arm(self) -> None:
            self._disarm()
            self._head_timer = self.loop.call_later(deadline, self._head_late)

        def _disarm(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def handle_events(self) -> None:
            before = self.cycle
            super().handle_events()
            if self.cycle is not before:
                self._disarm()  # a whole head arrived: the request is the Guard's now

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing() and (self.cycle is None or self.cycle.response_complete):
                self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _head_late(self) -> None:
            self._head_timer = None
            if (self.cycle is None or self.cycle.response_complete) and not self.transport.is_closing():
                self.transport.close()

    return Deadlined


class HttpServer:
    """Uvicorn on a socket we bound ourselves, in a daemon thread."""

    def __init__(self, rt: Runtime, host: str, port: int) -> None:
        self.rt = rt
        self.host = host
        self.port = port
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._stopping = False

    def start(self) -> str:
        """Bind and listen now (the URL is known at once); uvicorn starts in its thread and takes over the
        listening socket: connections made meanwhile wait in the backlog. Stdio answers in the meantime."""
        lease = self.rt.lease.mine if self.rt.lease is not None else None
        if lease is None:
            raise OSError("no lease to take the owner's token from: serving HTTP needs one")
        sock = bind(self.host, self.port)
        port = sock.getsockname()[1]
        shown = _shown(self.host)
        url = f"http://{shown}:{port}"
        names = frozenset() if self.host.lower() in WILDCARD_HOSTS or is_loopback(self.host) \
            else frozenset({shown.lower()})
        self._thread = threading.Thread(target=self._serve, args=(sock, lease.token, names), name="majordomus-http",
                                        daemon=True)
        self._thread.start()
        return url

    def _serve(self, sock: socket.socket, token: str, names: frozenset[str]) -> None:
        import uvicorn

        deadline = read_deadline()
        app = Guard(build_app(self.rt), token, names=names, deadline=deadline)
        # no proxy headers: nothing between a client and this loopback socket may rename the client (and their
        # middleware was a layer of every request); no `server` header to fingerprint
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off", loop="asyncio",
                                http=deadlined_protocol(deadline), timeout_keep_alive=KEEP_ALIVE_SECONDS,
                                timeout_graceful_shutdown=2, proxy_headers=False, server_header=False)
        self._server = uvicorn.Server(config)
        if self._stopping:
            return
        asyncio.run(self._server.serve(sockets=[sock]))

    def stop(self) -> None:
        self._stopping = True
        deadline = time.monotonic() + 5
        while self._server is None and self._thread is not None and self._thread.is_alive() \
                and time.monotonic() < deadline:
            time.sleep(0.01)  # still importing uvicorn: let it build the server it must now stop
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=max(0.1, deadline - time.monotonic()))
