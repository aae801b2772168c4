"""HTTP surfaces: `/`, `/mcp`, `/api/v1/*`, `/openapi.json`, `/swagger`; Host (421) and Origin (403) checks.

The only module with Starlette and uvicorn in it. Uvicorn runs in a thread of this process without
signal handlers of its own: the process's signal handling runs the one cleanup path.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import threading
import time
from importlib import resources
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import anyio.to_thread
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from majordomus import __version__
from majordomus.capabilities import projections
from majordomus.capabilities.registry import Caller, Capability, invoke
from majordomus.mcp.core import (
    HANDSHAKE_VERSIONS,
    INVALID_REQUEST,
    PROTOCOL_VERSION_KEY,
    Connection,
    RpcError,
    encode,
    error_response,
    parse,
)

if TYPE_CHECKING:
    from majordomus.mcp.runtime import Runtime

LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
SWAGGER_FILES = {"swagger-ui-bundle.js": "text/javascript", "swagger-ui.css": "text/css",
                 "init.js": "text/javascript", "LICENSE": "text/plain"}
SWAGGER_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>majordomus API</title>
<link rel="stylesheet" href="/swagger/swagger-ui.css"></head>
<body><div id="swagger-ui"></div>
<script src="/swagger/swagger-ui-bundle.js"></script><script src="/swagger/init.js"></script>
</body></html>
"""


def _json(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(json.dumps(body).encode(), status_code=status, headers=headers, media_type="application/json")


def _problem(status: int, code: str, message: str) -> Response:
    return _json(projections.error_body(code, message), status)


def _hostname(value: str) -> str:
    value = value.strip().lower()
    if value.startswith("["):
        return value[: value.find("]") + 1]
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def is_loopback(host: str | None) -> bool:
    return host is not None and (host in LOOPBACK_NAMES or host.startswith("127."))


class Guard:
    """DNS-rebinding defence on every request: the Host must name this server (421), an Origin must be ours (403)."""

    def __init__(self, app: ASGIApp, allowed: frozenset[str]) -> None:
        self.app = app
        self.allowed = allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = {k.lower(): v.decode("latin-1") for k, v in scope["headers"]}
            host = headers.get(b"host")
            if host is None or _hostname(host) not in self.allowed:
                await _problem(421, "misdirected", "this server answers to 127.0.0.1 or localhost only; "
                                                   "the Host header names another")(scope, receive, send)
                return
            origin = headers.get(b"origin")
            if origin is not None:
                parts = urlsplit(origin)
                if parts.scheme not in ("http", "https") or _hostname(parts.netloc) not in self.allowed:
                    await _problem(403, "forbidden", "cross-origin requests are refused: a web page of another "
                                                     "origin may not drive this server")(scope, receive, send)
                    return
        await self.app(scope, receive, send)


def _is_json(request: Request) -> bool:
    return request.headers.get("content-type", "").split(";")[0].strip().lower() == "application/json"


def _loopback(request: Request) -> bool:
    return is_loopback(request.client.host if request.client else None)


def _is_modern(message: Any) -> bool:
    params = message.get("params") if isinstance(message, dict) else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and PROTOCOL_VERSION_KEY in meta


def build_app(rt: Runtime) -> Starlette:
    """Every surface of one runtime."""
    registry = rt.registry

    def _is_command(message: dict[str, Any]) -> bool:
        """Commands may wait on capture: they run in a worker thread; queries answer on the loop."""
        params = message.get("params")
        name = params.get("name") if isinstance(params, dict) else None
        cap = registry.by_tool(name) if isinstance(name, str) else None
        return cap is None or cap.kind == "command"

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
        headers = request.headers
        session_id = headers.get("mcp-session-id")
        bridged = headers.get("x-majordomus-bridge") == "1"
        modern = _is_modern(message)
        is_dict = isinstance(message, dict)
        request_id = message.get("id") if is_dict else None
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
            conn = new = rt.open_session(bridged=bridged)
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
        if is_dict and message.get("method") == "tools/call" and _is_command(message):
            reply = await anyio.to_thread.run_sync(lambda: rt.core.handle(message, conn, headers=check,
                                                                          loopback=loopback))
        else:
            reply = rt.core.handle(message, conn, headers=check, loopback=loopback)
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
                args: Any = dict(request.query_params)
            else:
                if not _is_json(request):
                    return _problem(415, "invalid_input", "send the arguments as an application/json object")
                raw = await request.body()
                try:
                    args = json.loads(raw) if raw.strip() else {}
                except ValueError:
                    return _problem(400, "invalid_input", "the body is not JSON: send the arguments as one object")
                if not isinstance(args, dict):
                    return _problem(400, "invalid_input", "the body must be a JSON object of arguments")
            caller = Caller(via="http", loopback=_loopback(request))
            if cap.kind == "command":
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
    return Starlette(routes=routes)


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
        sock = bind(self.host, self.port)
        port = sock.getsockname()[1]
        shown = f"[{self.host}]" if ":" in self.host else self.host
        url = f"http://{shown}:{port}"
        allowed = set(LOOPBACK_NAMES)
        if not is_loopback(self.host):
            allowed.add(shown.lower())
        self._thread = threading.Thread(target=self._serve, args=(sock, frozenset(allowed)), name="majordomus-http",
                                        daemon=True)
        self._thread.start()
        return url

    def _serve(self, sock: socket.socket, allowed: frozenset[str]) -> None:
        import uvicorn

        app = Guard(build_app(self.rt), allowed)
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off", loop="asyncio",
                                http="h11", timeout_keep_alive=75, timeout_graceful_shutdown=2)
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
