"""Hostile input: 10,000 generated frames through one long-lived server, hostile external ids, forged requests.

Whatever arrives, the server keeps serving and its stdout carries JSON-RPC frames only.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcp_support import OPEN, McpProcess, call, initialize, run_mcp, structured

FRAMES_PER_BATCH = 50
BATCHES = 200  # 10,000 frames in all

json_leaf = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(10 ** 40), max_value=10 ** 40),
                      st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=40))
json_value = st.recursive(json_leaf, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                             st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                          max_leaves=12)
methods = st.sampled_from(["initialize", "tools/call", "tools/list", "ping", "server/discover",
                           "notifications/initialized", "resources/list", "", "tools/call\u0000"])
tool_names = st.sampled_from(["majordomus_session_attach", "majordomus_session_detach", "majordomus_episodes",
                              "majordomus_peers", "majordomus_announce", "nope"])
ids = st.one_of(st.integers(min_value=-(10 ** 30), max_value=10 ** 30), st.text(max_size=300), st.none(),
                st.floats(allow_nan=False), st.booleans(), st.lists(st.integers(), max_size=2))
external_ids = st.one_of(st.text(max_size=30), st.just("../../escape"), st.just("a\nb"), st.just("x" * 10_240),
                         st.just("  "), st.just("..")).map(lambda s: s)


@st.composite
def rpc_like(draw: st.DrawFn) -> bytes:
    message: dict[str, Any] = {"jsonrpc": draw(st.sampled_from(["2.0", "2.0", "1.0", 2]))}
    if draw(st.booleans()):
        message["id"] = draw(ids)
    message["method"] = draw(st.one_of(methods, json_value))
    choice = draw(st.integers(0, 3))
    if choice == 0:
        message["params"] = draw(json_value)
    elif choice == 1:
        arguments = draw(st.one_of(st.fixed_dictionaries({"external_id": external_ids}), json_value))
        message["params"] = {"name": draw(tool_names), "arguments": arguments}
    elif choice == 2:
        meta = {"io.modelcontextprotocol/protocolVersion": draw(st.sampled_from(["2026-07-28", "1900-01-01", 7])),
                "io.modelcontextprotocol/clientCapabilities": {}}
        message["params"] = {"_meta": meta, "name": draw(tool_names), "arguments": draw(json_value)}
    return json.dumps(message).encode()


@st.composite
def truncated(draw: st.DrawFn) -> bytes:
    whole = draw(rpc_like())
    return whole[: draw(st.integers(0, max(0, len(whole) - 1)))]


nested = st.integers(1, 200_000).map(lambda n: b"[" * n + b"]" * n)
invalid_utf8 = st.binary(min_size=1, max_size=64).map(lambda b: b'{"jsonrpc":"2.0","id":1,"method":"' + b + b'\xff"}')
frame = st.one_of(rpc_like(), truncated(), nested, invalid_utf8, st.binary(max_size=200), json_value.map(
    lambda v: json.dumps(v).encode())).map(lambda b: b.replace(b"\n", b" ").replace(b"\r", b" "))


def check_frame(line: bytes) -> dict[str, Any]:
    message = json.loads(line)
    assert isinstance(message, dict) and message["jsonrpc"] == "2.0", line[:200]
    assert "id" in message and (("result" in message) != ("error" in message)), line[:200]
    return message


@pytest.mark.slow
def test_ten_thousand_generated_frames_never_crash_the_server(initialised_repo: Path) -> None:
    with McpProcess(initialised_repo, "--http-port", "0") as server:
        url = server.url()
        state = {"batch": 0, "answers": 0}

        @settings(max_examples=BATCHES, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(st.lists(frame, min_size=FRAMES_PER_BATCH, max_size=FRAMES_PER_BATCH))
        def batch(frames: list[bytes]) -> None:
            state["batch"] += 1
            sentinel = f"sentinel-{state['batch']}"
            server.send_raw(b"".join(f + b"\n" for f in frames) + json.dumps(
                {"jsonrpc": "2.0", "id": sentinel, "method": "ping"}).encode() + b"\n")
            while True:
                message = check_frame(server.lines.get(timeout=60))
                state["answers"] += 1
                if message.get("id") == sentinel:
                    assert message["result"] == {}
                    break
            assert server.proc.poll() is None

        batch()
        assert state["batch"] >= BATCHES and state["answers"] > BATCHES
        # The server still serves a well-formed client, and its HTTP side never answered with a crash.
        assert server.request(initialize("after-the-storm", request_id=99))["result"]["protocolVersion"]
        assert httpx.get(f"{url}/api/v1/live", timeout=10).status_code == 200
        server.close_stdin()
        assert server.wait(60) == 0
        assert "could not be handled" not in server.stderr and "Traceback" not in server.stderr
    assert all(check_frame(line) for line in server.raw_lines)


@pytest.mark.slow
def test_generated_frames_over_http_get_json_answers_not_crashes(initialised_repo: Path) -> None:
    with McpProcess(initialised_repo, "--http-port", "0", env={"MAJORDOMUS_HTTP_IDLE_SECONDS": "1"}) as server:
        url = server.url()
        client = httpx.Client(timeout=10, headers=server.auth())

        @settings(max_examples=300, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(frame)
        def post(body: bytes) -> None:
            response = client.post(f"{url}/mcp", content=body, headers={"Content-Type": "application/json"})
            assert response.status_code in (200, 202, 400, 404, 413), response.status_code
            if response.content:
                json.loads(response.content)

        post()
        client.close()
        server.close_stdin()
        assert server.wait(30) == 0


def test_hostile_external_ids_are_refused_or_safely_keyed(initialised_repo: Path) -> None:
    code, out, err = run_mcp(initialised_repo, [
        initialize(),
        call(2, "majordomus_session_attach", {"external_id": "line one\nline two"}),
        call(3, "majordomus_session_attach", {"external_id": "x" * 10_240}),
        call(4, "majordomus_session_attach", {"external_id": "bell\x07"}),
        call(5, "majordomus_session_attach", {"external_id": "../../../outside"}),
    ], "--standalone")
    assert code == 0, err
    assert out[1]["result"]["isError"] and out[1]["result"]["content"][0]["text"] == \
        "argument 'external_id' must be one line"
    assert out[2]["result"]["isError"] and "too long" in out[2]["result"]["content"][0]["text"]
    assert out[3]["result"]["isError"] and "control characters" in out[3]["result"]["content"][0]["text"]
    escaped = structured(out[4])["episode"]
    assert escaped["external_id"] == "../../../outside"
    names = os.listdir(initialised_repo / OPEN)
    assert len(names) == 1 and "/" not in names[0] and ".." not in names[0]
    assert not (initialised_repo.parent / "outside.yaml").exists()
    assert not list(initialised_repo.parent.glob("*outside*"))


def test_an_oversized_frame_is_answered_and_skipped(initialised_repo: Path) -> None:
    with McpProcess(initialised_repo, "--standalone") as server:
        server.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"' + b"x" * (5 * 1024 * 1024)
                        + b'"}}\n')
        answer = server.next_frame(30)
        assert answer["error"]["code"] == -32600 and "too large" in answer["error"]["message"]
        assert server.request({"jsonrpc": "2.0", "id": 2, "method": "ping"})["result"] == {}
