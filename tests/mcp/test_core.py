"""The JSON-RPC core, in process: both eras, every error code, and a server that keeps serving."""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from majordomus.capabilities.catalogue import default_registry
from majordomus.capabilities.peer_board import PeerBoard
from majordomus.capabilities.registry import Registry, Services
from majordomus.episodes.board import Board, Opened
from majordomus.mcp.core import Connection, Core, parse
from majordomus.mcp.stdio import TOO_LARGE, read_frames

META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}


class Driver:
    def open(self, external_id: str, **_: object) -> Opened:
        return Opened(f"session s-1 opened ({external_id})", held=True)

    def close(self, external_id: str, reason: str) -> str:
        return f"episode closed (closed, reason {reason})"

    def mark(self, external_id: str, *, held: bool, **_: object) -> None:
        return None


def make_core(registry: Registry | None = None) -> Core:
    services = Services(board=Board(Driver(), 900), peers=PeerBoard())
    return Core(registry or default_registry(), services, lambda peer: f"You are peer {peer}", "0.0")


@pytest.fixture
def core() -> Core:
    return make_core()


def rpc(core: Core, message: Any, conn: Connection | None = None) -> dict[str, Any]:
    reply = core.handle(message, conn)
    assert reply.body is not None
    return reply.body


def initialised(core: Core, version: str = "2025-06-18") -> Connection:
    conn = Connection(transport="stdio")
    body = rpc(core, {"jsonrpc": "2.0", "id": 0, "method": "initialize",
                      "params": {"protocolVersion": version, "clientInfo": {"name": "t", "version": "1"}}}, conn)
    assert "result" in body
    return conn


def error_code(body: dict[str, Any]) -> int:
    return body["error"]["code"]


@pytest.mark.parametrize("raw", [b"{", b"\xff\xfe", b"[1,", b'{"a": NaN}', b"1e999", b"[" * 100_000 + b"]" * 100_000])
def test_what_is_not_json_is_a_parse_error_with_a_null_id(core: Core, raw: bytes) -> None:
    body = core.handle_bytes(raw, None).body
    assert body is not None and error_code(body) == -32700 and body["id"] is None


@pytest.mark.parametrize("message", [[], [{"jsonrpc": "2.0", "id": 1, "method": "ping"}], 7, "x", None,
                                     {"jsonrpc": "2.0", "id": True, "method": "ping"},
                                     {"jsonrpc": "2.0", "id": 1.5, "method": "ping"},
                                     {"jsonrpc": "1.0", "id": 1, "method": "ping"},
                                     {"jsonrpc": "2.0", "id": 1}])
def test_malformed_messages_and_batches_are_invalid_requests(core: Core, message: Any) -> None:
    assert error_code(rpc(core, message, initialised(core))) == -32600


def test_params_must_be_an_object(core: Core) -> None:
    conn = initialised(core)
    assert error_code(rpc(core, {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": [1]}, conn)) == -32602


@pytest.mark.parametrize(("offered", "answered"), [("2025-06-18", "2025-06-18"), ("2025-11-25", "2025-11-25"),
                                                    ("2024-11-05", "2025-11-25"), ("2026-07-28", "2025-11-25"),
                                                    ("banana", "2025-11-25")])
def test_initialize_answers_the_version_or_counter_offers(core: Core, offered: str, answered: str) -> None:
    conn = Connection(transport="stdio")
    body = rpc(core, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": offered}},
               conn)
    assert body["result"]["protocolVersion"] == answered
    assert body["result"]["capabilities"] == {"tools": {"listChanged": False}}
    assert body["result"]["instructions"] == f"You are peer {conn.peer}"


def test_initialize_without_a_version_is_invalid_params(core: Core) -> None:
    body = rpc(core, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}, Connection("stdio"))
    assert error_code(body) == -32602


def test_before_initialize_only_ping_and_stateless_requests_are_served(core: Core) -> None:
    conn = Connection(transport="stdio")
    assert error_code(rpc(core, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, conn)) == -32600
    assert rpc(core, {"jsonrpc": "2.0", "id": 2, "method": "ping"}, conn)["result"] == {}
    listing = rpc(core, {"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"_meta": META}}, conn)
    assert listing["result"]["resultType"] == "complete"


def test_notifications_and_client_responses_get_no_answer(core: Core) -> None:
    conn = initialised(core)
    for message in ({"jsonrpc": "2.0", "method": "notifications/initialized"},
                    {"jsonrpc": "2.0", "method": "no/such"}, {"jsonrpc": "2.0", "id": 5, "result": {}},
                    {"jsonrpc": "2.0", "method": "x", "params": 3}):
        assert core.handle(message, conn).body is None


def test_an_unknown_method_is_method_not_found(core: Core) -> None:
    assert error_code(rpc(core, {"jsonrpc": "2.0", "id": 1, "method": "resources/list"}, initialised(core))) == -32601


def test_handshake_results_carry_no_result_type(core: Core) -> None:
    body = rpc(core, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, initialised(core))
    assert "resultType" not in body["result"]
    assert [t["name"] for t in body["result"]["tools"]] == [c.tool for c in default_registry().tools()]


def test_server_discover_names_both_eras(core: Core) -> None:
    body = rpc(core, {"jsonrpc": "2.0", "id": "d", "method": "server/discover", "params": {"_meta": META}})
    result = body["result"]
    assert result["supportedVersions"] == ["2026-07-28", "2025-11-25", "2025-06-18"]
    assert result["resultType"] == "complete" and result["cacheScope"] in ("public", "private")
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "majordomus"


def test_stateless_lists_carry_cache_hints(core: Core) -> None:
    result = rpc(core, {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": META}})["result"]
    assert result["ttlMs"] >= 0 and result["cacheScope"] == "public"


def test_an_unsupported_stateless_version_is_32022_naming_the_supported(core: Core) -> None:
    meta = {**META, "io.modelcontextprotocol/protocolVersion": "1900-01-01"}
    body = rpc(core, {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}})
    assert error_code(body) == -32022
    assert body["error"]["data"] == {"supported": ["2026-07-28", "2025-11-25", "2025-06-18"],
                                     "requested": "1900-01-01"}


@pytest.mark.parametrize("meta", [{"io.modelcontextprotocol/protocolVersion": "2026-07-28"},
                                  {**META, "io.modelcontextprotocol/protocolVersion": 7}])
def test_a_broken_stateless_envelope_is_invalid_params(core: Core, meta: dict[str, Any]) -> None:
    body = rpc(core, {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}})
    assert error_code(body) == -32602


def test_ping_is_gone_in_the_stateless_era(core: Core) -> None:
    body = rpc(core, {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"_meta": META}})
    assert error_code(body) == -32601


def test_headers_must_match_the_body_over_http(core: Core) -> None:
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "majordomus_peers",
                                                                              "_meta": META}}
    good = {"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "majordomus_peers"}
    assert "result" in core.handle(message, None, headers=good).body  # type: ignore[operator]
    encoded = {**good, "mcp-name": "=?base64?bWFqb3Jkb211c19wZWVycw==?="}
    assert "result" in core.handle(message, None, headers=encoded).body  # type: ignore[operator]
    for broken in ({**good, "mcp-method": "tools/list"}, {**good, "mcp-name": "other"},
                   {k: v for k, v in good.items() if k != "mcp-protocol-version"}):
        reply = core.handle(message, None, headers=broken)
        assert reply.status == 400 and error_code(reply.body) == -32020  # type: ignore[arg-type]


def test_an_unknown_tool_is_invalid_params_and_bad_arguments_are_a_tool_error(core: Core) -> None:
    conn = initialised(core)
    unknown = rpc(core, {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "nope"}}, conn)
    assert error_code(unknown) == -32602
    bad = rpc(core, {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                     "params": {"name": "majordomus_session_attach", "arguments": {"external_id": 5}}}, conn)
    assert bad["result"]["isError"] is True
    assert bad["result"]["_meta"]["majordomus"]["error"]["code"] == "invalid_input"
    missing = rpc(core, {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                         "params": {"name": "majordomus_session_attach", "arguments": {}}}, conn)
    assert missing["result"]["content"][0]["text"] == ("argument 'external_id' is required and must not be blank: "
                                                       "it is what a reconnecting client is recognised by")


def test_a_failing_handler_becomes_an_internal_tool_error_and_the_server_keeps_serving() -> None:
    def explode(*_: Any) -> Any:
        raise RuntimeError("boom")

    registry = Registry([dataclasses.replace(cap, handler=explode) if cap.id == "peers.list" else cap
                         for cap in default_registry()])
    core = make_core(registry)
    conn = initialised(core)
    body = rpc(core, {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "majordomus_peers"}}, conn)
    assert body["result"]["isError"] is True
    assert body["result"]["_meta"]["majordomus"]["error"]["code"] == "internal"
    assert rpc(core, {"jsonrpc": "2.0", "id": 2, "method": "ping"}, conn)["result"] == {}


def test_every_message_of_a_connection_is_its_heartbeat(core: Core) -> None:
    conn = initialised(core)
    rpc(core, {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": "majordomus_session_attach", "arguments": {"external_id": "hb"}}}, conn)
    entry = core.services.board._entries["hb"]
    entry.last_activity -= 100
    core.handle({"jsonrpc": "2.0", "method": "notifications/anything"}, conn)
    assert core.services.board.get("hb")["last_activity_seconds_ago"] == 0  # type: ignore[index]


def test_parse_refuses_an_oversized_frame() -> None:
    with pytest.raises(Exception, match="too large"):
        parse(b" " * (4 * 1024 * 1024 + 1))


def test_read_frames_splits_lines_skips_blanks_and_cuts_oversized_ones() -> None:
    r, w = os.pipe()
    os.write(w, b'{"a":1}\r\n\n   \n' + b"x" * 300 + b"\n" + b'{"b":2}\n{"c":3}')
    os.close(w)
    assert list(read_frames(r, limit=100)) == [b'{"a":1}', TOO_LARGE, b'{"b":2}', b'{"c":3}']
    os.close(r)


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-10**12, 10**12) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20)


@given(outcome=st.dictionaries(st.text(max_size=8), _JSON_VALUES, max_size=5),
       request_id=st.one_of(st.integers(), st.text(max_size=40)))
@example(outcome={"\x7f": None}, request_id=0)  # DEL: ASCII, yet escaped by an ASCII-only encoding (found by CI)
@example(outcome={"k": ["a\x7fb", "\x1f"]}, request_id="\x7f")
@settings(max_examples=300, deadline=None)
def test_a_tool_result_encoded_once_is_the_bytes_of_encoding_it_whole(outcome: dict[str, Any], request_id: Any
                                                                      ) -> None:
    """The structuredContent is spliced in from the result's text: byte for byte what a whole encoding gives,
    whatever the id holds (even the splice marker's own words) and whatever the text's characters."""
    from majordomus.capabilities.projections import tool_result
    from majordomus.mcp.core import _SPLICE, encode

    for rid in (request_id, _SPLICE, f'"{_SPLICE}"'):
        body = {"jsonrpc": "2.0", "id": rid, "result": tool_result(outcome)}
        assert encode(body) == json.dumps(body, separators=(",", ":"), allow_nan=False).encode("ascii")
        assert json.loads(body["result"]["content"][0]["text"]) == outcome
