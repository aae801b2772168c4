"""JSON-RPC dispatch for both protocol eras; every error reaches the wire here and only here.

Transport-agnostic: stdio and HTTP hand in one decoded frame and the connection it came on (or
none, for a 2026-07-28 request over HTTP), and get back the response and an HTTP status hint.
Handshake era: `initialize` (2025-06-18, 2025-11-25; anything else is counter-offered),
`notifications/initialized`, `ping`. Stateless era (2026-07-28): protocol version and client
capabilities in `params._meta`, `server/discover`, `resultType`, `ttlMs`/`cacheScope`, -32022.
"""

from __future__ import annotations

import json
import math
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from majordomus.capabilities import projections
from majordomus.capabilities.registry import Caller, ClientInfo, Registry, Services, invoke

HANDSHAKE_VERSIONS: tuple[str, ...] = ("2025-11-25", "2025-06-18")  # newest first: the counter-offer
MODERN_VERSIONS: tuple[str, ...] = ("2026-07-28",)
SUPPORTED_VERSIONS: tuple[str, ...] = (*MODERN_VERSIONS, *HANDSHAKE_VERSIONS)

PROTOCOL_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
CLIENT_INFO_KEY = "io.modelcontextprotocol/clientInfo"
SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
HEADER_MISMATCH = -32020
UNSUPPORTED_PROTOCOL_VERSION = -32022

MAX_FRAME_BYTES = 4 * 1024 * 1024
TOOLS_TTL_MS = 60_000


class RpcError(Exception):
    """A JSON-RPC error on its way to the wire; `status` is what HTTP answers with it."""

    def __init__(self, code: int, message: str, data: Any = None, status: int = 200) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data
        self.status = status


@dataclass
class Connection:
    """One MCP connection: the stdio process, an HTTP session, or a bridged stdio relayed over HTTP."""

    transport: Literal["stdio", "http"]
    bridged: bool = False
    id: str = field(default_factory=lambda: secrets.token_hex(16))
    peer: str | None = None
    version: str | None = None  # the negotiated handshake-era version; None before initialize
    client: ClientInfo | None = None
    last_seen: float = field(default_factory=time.monotonic)
    sitting: str | None = None  # the client process behind a stdio peer (its own, or a bridge's header)
    bridge_pid: int | None = None  # a bridged connection's bridge process
    replaying: bool = False  # set while a bridge's (or this process's) replay after failover is handled


@dataclass(frozen=True)
class Reply:
    body: dict[str, Any] | None  # None: nothing goes back (a notification, a client's response)
    status: int = 200


Instructions = Callable[[str | None], str]


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError("a number out of range")
    return value


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse(raw: bytes) -> Any:
    """Decode one frame; RpcError -32700 for anything that is not one JSON value in UTF-8."""
    if len(raw) > MAX_FRAME_BYTES:
        raise RpcError(INVALID_REQUEST, f"message too large: at most {MAX_FRAME_BYTES} bytes per frame", status=413)
    try:
        text = raw.decode("utf-8")
        return json.loads(text, parse_float=_finite, parse_constant=_no_constants)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        reason = "not UTF-8" if isinstance(exc, UnicodeDecodeError) else "not valid JSON"
        raise RpcError(PARSE_ERROR, f"Parse error: the frame is {reason}", status=400) from None


def encode(body: dict[str, Any]) -> bytes:
    """One frame, ASCII-safe (a lone surrogate in an echoed id cannot break stdout).

    A tool result whose text is its structuredContent's JSON (all ASCII but DEL) is encoded once: the text is
    spliced in as the structuredContent, byte for byte what encoding the object would give. DEL (0x7f) is ASCII,
    yet an ASCII-only encoding escapes it (`\\u007f`) where the text keeps it raw: such a result is encoded whole."""
    result = body.get("result")
    if isinstance(result, dict) and "structuredContent" in result:
        content = result.get("content")
        text = content[0].get("text") if isinstance(content, list) and len(content) == 1 \
            and isinstance(content[0], dict) else None
        if isinstance(text, projections.StructuredText) and text.isascii() and "\x7f" not in text:
            shell = {**body, "result": {**result, "structuredContent": _SPLICE}}
            head, _, tail = json.dumps(shell, separators=(",", ":"), allow_nan=False).rpartition(_SPLICED)
            return f"{head}{text}{tail}".encode("ascii")
    return json.dumps(body, separators=(",", ":"), allow_nan=False).encode("ascii")


# what stands for the structuredContent while the rest of a result is encoded: the last such string in the frame
# (the structuredContent is encoded after the content and the id, so nothing a client sent can come after it)
_SPLICE = "majordomus-splice-" + secrets.token_hex(16)
_SPLICED = json.dumps(_SPLICE)


def error_response(request_id: Any, error: RpcError) -> Reply:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id,
                            "error": {"code": error.code, "message": error.message}}
    if error.data is not None:
        body["error"]["data"] = error.data
    return Reply(body, error.status)


def decode_header_value(value: str | None) -> str | None:
    """`=?base64?…?=` carries a value that is not plain ASCII (2026-07-28 Streamable HTTP)."""
    if value is not None and value.startswith("=?base64?") and value.endswith("?=") and len(value) >= 11:
        import base64
        import binascii

        try:
            return base64.b64decode(value[9:-2], validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
    return value


def _client_info(raw: Any) -> ClientInfo | None:
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
        return None
    version = raw.get("version")
    return ClientInfo(name=raw["name"][:200], version=version[:100] if isinstance(version, str) else "")


class Core:
    """Dispatch of one frame in the context of its connection."""

    def __init__(self, registry: Registry, services: Services, instructions: Instructions,
                 server_version: str) -> None:
        self.registry = registry
        self.services = services
        self.instructions = instructions
        self.server_info = {"name": "majordomus", "title": "majordomus", "version": server_version}
        self._tools = [projections.tool(cap) for cap in registry.tools()]

    # -- entry points ----------------------------------------------------------------------------

    def handle_bytes(self, raw: bytes, conn: Connection | None, **kw: Any) -> Reply:
        try:
            message = parse(raw)
        except RpcError as exc:
            return error_response(None, exc)
        return self.handle(message, conn, **kw)

    def handle(self, message: Any, conn: Connection | None, *, headers: Mapping[str, str] | None = None,
               loopback: bool = True) -> Reply:
        """Answer one decoded frame. Never raises: a bug becomes -32603 and the server keeps serving."""
        request_id: Any = None
        try:
            if isinstance(message, list):
                raise RpcError(INVALID_REQUEST, "batches are not supported: protocol versions 2025-06-18 and "
                                                "later send one JSON-RPC message per frame", status=400)
            if not isinstance(message, dict):
                raise RpcError(INVALID_REQUEST, "Invalid Request: a frame must be a JSON-RPC object", status=400)
            if conn is not None:
                self.heartbeat(conn)
            if "method" not in message and ("result" in message or "error" in message):
                return Reply(None, 202)  # a client's response: this server sends no requests to answer
            has_id = "id" in message
            raw_id = message.get("id")
            if has_id and (isinstance(raw_id, bool) or not isinstance(raw_id, (str, int))):
                raise RpcError(INVALID_REQUEST, "Invalid Request: the id must be a string or an integer", status=400)
            request_id = raw_id
            if message.get("jsonrpc") != "2.0" or not isinstance(message.get("method"), str):
                raise RpcError(INVALID_REQUEST, "Invalid Request: a request needs \"jsonrpc\": \"2.0\" and a "
                                                "method name", status=400)
            params = message.get("params", {})
            if not isinstance(params, dict):
                if not has_id:
                    return Reply(None, 202)
                raise RpcError(INVALID_PARAMS, "Invalid params: params must be an object", status=400)
            if not has_id:
                self._notification(message["method"], params, conn)
                return Reply(None, 202)
            result = self._request(message["method"], params, conn, headers, loopback)
            return Reply({"jsonrpc": "2.0", "id": request_id, "result": result})
        except RpcError as exc:
            return error_response(request_id, exc)
        except Exception as exc:  # noqa: BLE001 - the exception-to-wire boundary
            return error_response(request_id, RpcError(INTERNAL_ERROR, f"Internal error: {type(exc).__name__}",
                                                       status=500))

    def heartbeat(self, conn: Connection) -> None:
        """Every inbound message of a connection is its peer's heartbeat (memory only)."""
        conn.last_seen = time.monotonic()
        if conn.peer is not None:
            self.services.peers.touch(conn.peer)
            self.services.board.touch(conn.peer)

    # -- notifications ---------------------------------------------------------------------------

    def _notification(self, method: str, params: dict[str, Any], conn: Connection | None) -> None:
        # notifications/initialized, notifications/cancelled and anything unknown: nothing to answer.
        return None

    # -- requests --------------------------------------------------------------------------------

    def _request(self, method: str, params: dict[str, Any], conn: Connection | None,
                 headers: Mapping[str, str] | None, loopback: bool) -> dict[str, Any]:
        if method == "initialize":
            return self._initialize(params, conn)
        meta = params.get("_meta")
        if isinstance(meta, dict) and PROTOCOL_VERSION_KEY in meta or method == "server/discover":
            return self._modern(method, params, conn, headers, loopback)
        if method == "ping":
            return {}
        if conn is None or conn.version is None:
            raise RpcError(INVALID_REQUEST, "this connection is not initialised: send initialize first, or carry the "
                                            f"protocol version in params._meta ({PROTOCOL_VERSION_KEY})", status=400)
        if method == "tools/list":
            return {"tools": self._tools}
        if method == "tools/call":
            assert conn.peer is not None
            caller = Caller(via="mcp", peer=conn.peer, client=conn.client, era=conn.version, loopback=loopback,
                            sitting=conn.sitting, bridge=conn.bridge_pid, replay=conn.replaying)
            return self._call(params, caller)
        raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method}")

    def _initialize(self, params: dict[str, Any], conn: Connection | None) -> dict[str, Any]:
        requested = params.get("protocolVersion")
        if not isinstance(requested, str):
            raise RpcError(INVALID_PARAMS, "Invalid params: initialize needs a protocolVersion string", status=400)
        if conn is None:
            raise RpcError(INVALID_REQUEST, "initialize needs a connection to initialise", status=400)
        version = requested if requested in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[0]  # the counter-offer
        conn.version = version
        client = _client_info(params.get("clientInfo"))
        conn.client = client or conn.client
        self._ensure_peer(conn, version)
        return {
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": self.server_info,
            "instructions": self.instructions(conn.peer),
        }

    def _ensure_peer(self, conn: Connection, era: str) -> str:
        """A connection's peer is born with its first initialize (or first stateless request)."""
        peers = self.services.peers
        if conn.peer is None or peers.get(conn.peer) is None:
            conn.peer = peers.new(conn.transport, conn.client, era, bridged=conn.bridged).id
        else:
            peer = peers.get(conn.peer)
            assert peer is not None
            peer.client = conn.client or peer.client
            peer.era = era
        return conn.peer

    def _modern(self, method: str, params: dict[str, Any], conn: Connection | None,
                headers: Mapping[str, str] | None, loopback: bool) -> dict[str, Any]:
        """The 2026-07-28 ladder: envelope, then headers, then the version, then the method."""
        meta = params.get("_meta")
        if not isinstance(meta, dict):
            raise RpcError(INVALID_PARAMS, f"params._meta must be an object carrying {PROTOCOL_VERSION_KEY!r} and "
                                           f"{CLIENT_CAPABILITIES_KEY!r}", status=400)
        missing = [k for k in (PROTOCOL_VERSION_KEY, CLIENT_CAPABILITIES_KEY) if k not in meta]
        if missing:
            raise RpcError(INVALID_PARAMS, f"params._meta is missing {', '.join(missing)}", status=400)
        version = meta[PROTOCOL_VERSION_KEY]
        if headers is not None:
            self._check_headers(method, params, version, headers)
        if not isinstance(version, str):
            raise RpcError(INVALID_PARAMS, "the protocol version in params._meta must be a string", status=400)
        if version not in MODERN_VERSIONS:
            raise RpcError(UNSUPPORTED_PROTOCOL_VERSION, "Unsupported protocol version",
                           {"supported": list(SUPPORTED_VERSIONS), "requested": version}, status=400)
        client = _client_info(meta.get(CLIENT_INFO_KEY))
        if conn is not None:
            # Stateless era on a connection (stdio, bridged stdio): the process is still the peer.
            conn.client = client or conn.client
            caller = Caller(via="mcp", peer=self._ensure_peer(conn, version), client=conn.client, era=version,
                            loopback=loopback, sitting=conn.sitting, bridge=conn.bridge_pid,
                            replay=conn.replaying)
        else:
            caller = Caller(via="mcp", stateless=True, client=client, era=version, loopback=loopback)
        if method == "server/discover":
            result: dict[str, Any] = {"supportedVersions": list(SUPPORTED_VERSIONS),
                                      "capabilities": {"tools": {"listChanged": False}},
                                      "serverInfo": self.server_info, "instructions": self.instructions(caller.peer),
                                      "ttlMs": 0, "cacheScope": "private"}
        elif method == "tools/list":
            result = {"tools": self._tools, "ttlMs": TOOLS_TTL_MS, "cacheScope": "public"}
        elif method == "tools/call":
            result = self._call(params, caller)
        else:
            raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method}", status=404)
        result["resultType"] = "complete"
        result["_meta"] = {**result.get("_meta", {}), SERVER_INFO_KEY: self.server_info}
        return result

    @staticmethod
    def _check_headers(method: str, params: dict[str, Any], version: Any, headers: Mapping[str, str]) -> None:
        """Over HTTP the routing headers must say what the body says (-32020 otherwise)."""
        if headers.get("mcp-protocol-version") != version:
            raise RpcError(HEADER_MISMATCH, "Header mismatch: MCP-Protocol-Version must equal the protocol version "
                                            "in params._meta", status=400)
        if headers.get("mcp-method") != method:
            raise RpcError(HEADER_MISMATCH, "Header mismatch: Mcp-Method must equal the request's method",
                           status=400)
        if method == "tools/call" and isinstance(params.get("name"), str):
            if decode_header_value(headers.get("mcp-name")) != params["name"]:
                raise RpcError(HEADER_MISMATCH, "Header mismatch: Mcp-Name must equal the tool name", status=400)

    def _call(self, params: dict[str, Any], caller: Caller) -> dict[str, Any]:
        name = params.get("name")
        if not isinstance(name, str):
            raise RpcError(INVALID_PARAMS, "Invalid params: tools/call needs the tool's name")
        cap = self.registry.by_tool(name)
        if cap is None or not cap.executable:
            raise RpcError(INVALID_PARAMS, f"Unknown tool: {name[:100]!r}; tools/list names the tools of this server")
        return projections.tool_result(invoke(cap, self.services, caller, params.get("arguments")))
