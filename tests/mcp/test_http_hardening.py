"""Hostile HTTP against a real `majordomus-mcp` on loopback.

A 100k-deep JSON body gave a 500 with a text body; REST read and parsed 100 MB bodies (RSS +100 MB that
stayed); `/mcp` applied its 4 MiB only after reading the whole body; a chunked body with no end and 200
slowloris connections were held forever; `Host: localhost:1@evil`, `[::1].evil.com`, a trailing space and
`Origin: http://localhost:<any port>` passed; OpenAPI omitted 401/415/421; a 2026-07-28 request with the
protocol header but no `_meta` version got -32600; the tool schemas allowed a blank `external_id`/`intent`.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import jsonschema
import pytest

from mcp_support import McpProcess, auth, call, initialize

JSON = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
DEADLINE = 2.0  # MAJORDOMUS_HTTP_READ_DEADLINE_SECONDS of the server under test
LIMIT = 4 * 1024 * 1024


@pytest.fixture
def served(initialised_repo: Path) -> Iterator[tuple[McpProcess, str, dict[str, str]]]:
    with McpProcess(initialised_repo, "--http-port", "0",
                    env={"MAJORDOMUS_HTTP_READ_DEADLINE_SECONDS": str(DEADLINE)}) as proc:
        url = proc.url()
        proc.request(initialize("owner"))
        yield proc, url, auth(initialised_repo)
        proc.close_stdin()
        assert proc.wait() == 0


def connect(url: str, timeout: float = 10.0) -> socket.socket:
    parts = urlsplit(url)
    return socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80), timeout=timeout)


def read_response(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """One HTTP/1.1 response off a raw socket (Content-Length framed, as this server answers)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise AssertionError(f"connection closed before a response: {data!r}")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return status, headers, body


def request_head(url: str, method: str, path: str, headers: dict[str, str]) -> bytes:
    netloc = urlsplit(url).netloc
    lines = [f"{method} {path} HTTP/1.1", f"Host: {netloc}", *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def closed_by_server(sock: socket.socket) -> bool:
    try:
        return sock.recv(65536) == b""
    except ConnectionResetError:
        return True


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


# -- bodies --------------------------------------------------------------------------------------------------------

def test_a_100k_deep_json_body_is_a_400_json_error(served: tuple[McpProcess, str, dict[str, str]]) -> None:
    """1. POST 100,000 nested arrays (and objects) to a REST route and to /mcp. Result: 400 with a JSON body that
    says the nesting is too deep (REST) or a JSON-RPC error (MCP); never a 500, the server keeps serving."""
    _, url, owner = served
    deep = b"[" * 100_000 + b"]" * 100_000
    deep_object = b'{"a":' * 100_000 + b"1" + b"}" * 100_000
    with httpx.Client(base_url=url, timeout=20, headers=owner) as client:
        for body in (deep, deep_object):
            rest = client.post("/api/v1/episodes/detach", content=body, headers=JSON)
            assert rest.status_code == 400, rest.text
            assert rest.json()["error"]["code"] == "invalid_input"
            assert "nested" in rest.json()["error"]["message"]
            mcp = client.post("/mcp", content=body, headers=JSON)
            assert mcp.status_code == 400 and mcp.json()["error"]["code"] in (-32700, -32600), mcp.text
        # 65 levels is past the bound, 32 is fine (a body the capability then judges on its own terms)
        too_deep = client.post("/api/v1/peers/announce", content=b'{"intent": "x", "scope": ' + b"[" * 65 + b"]" * 65
                               + b"}", headers=JSON)
        assert too_deep.status_code == 400 and "nested" in too_deep.json()["error"]["message"]
        assert client.get("/api/v1/ready").status_code == 200


def test_rest_and_mcp_refuse_a_declared_oversize_body_before_reading_it(
        served: tuple[McpProcess, str, dict[str, str]]) -> None:
    """1. send only the headers of a POST declaring Content-Length 100 MB (REST) and 5 MiB (/mcp), no body.
    Result: 413 with a JSON body at once, well inside the read deadline: the server did not wait for the bytes."""
    _, url, owner = served
    for path, length in (("/api/v1/episodes/detach", 100 * 1024 * 1024), ("/mcp", LIMIT + 1)):
        with connect(url, timeout=DEADLINE * 0.75) as sock:
            sock.sendall(request_head(url, "POST", path, {**owner, **JSON, "Content-Length": str(length)}))
            status, headers, body = read_response(sock)
        assert status == 413, body
        assert headers["content-type"].startswith("application/json")
        text = json.dumps(json.loads(body))
        assert "4194304" in text or "4 MiB" in text


def test_a_streamed_body_is_counted_while_it_is_read(served: tuple[McpProcess, str, dict[str, str]]) -> None:
    """1. stream 100 MB chunked to a REST route and to /mcp. Result: 413 once 4 MiB have come in; the server's
    resident memory does not grow by anything like 100 MB."""
    proc, url, owner = served
    before = rss_kib(proc.proc.pid)
    chunk = b"[" * 65536
    framed = f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"
    for path in ("/api/v1/peers/announce", "/mcp"):
        with connect(url) as sock:
            sock.sendall(request_head(url, "POST", path, {**owner, **JSON, "Transfer-Encoding": "chunked"}))
            sent = 0
            try:
                while sent < 100 * 1024 * 1024:
                    sock.sendall(framed)
                    sent += len(chunk)
            except (BrokenPipeError, ConnectionResetError):
                pass
            status, _, body = read_response(sock)
        assert status == 413, body
        assert sent < 100 * 1024 * 1024  # the server stopped reading: the client could not push it all
    grown = rss_kib(proc.proc.pid) - before
    assert grown < 40 * 1024, f"RSS grew by {grown} KiB"
    with httpx.Client(base_url=url, timeout=10, headers=owner) as client:
        assert client.get("/api/v1/ready").status_code == 200


# -- slow clients ----------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_a_chunked_body_with_no_end_times_out(served: tuple[McpProcess, str, dict[str, str]]) -> None:
    """1. a POST with Transfer-Encoding: chunked sends one chunk and then nothing, on a REST route and on /mcp.
    Result: 408 with a JSON body after the read deadline, and the server closes the connection."""
    _, url, owner = served
    for path in ("/api/v1/episodes/detach", "/mcp"):
        with connect(url, timeout=DEADLINE * 5) as sock:
            sock.sendall(request_head(url, "POST", path, {**owner, **JSON, "Transfer-Encoding": "chunked"})
                         + b"2\r\n{}\r\n")
            status, headers, body = read_response(sock)
            assert status == 408, body
            assert headers["content-type"].startswith("application/json")
            assert headers.get("connection") == "close"
            assert closed_by_server(sock)


@pytest.mark.slow
def test_two_hundred_slowloris_connections_neither_starve_nor_stay(
        served: tuple[McpProcess, str, dict[str, str]]) -> None:
    """1. 200 connections each send a request head one header line at a time, slower than the deadline;
    2. meanwhile the owner asks /api/v1/ready and attaches over /mcp. Result: the owner is answered while the
    200 are still open; every one of the 200 is closed by the server after the read deadline."""
    _, url, owner = served
    socks = [connect(url, timeout=DEADLINE * 5) for _ in range(200)]
    stop = threading.Event()

    def trickle() -> None:
        for sock in socks:
            sock.sendall(f"GET /api/v1/ready HTTP/1.1\r\nHost: {urlsplit(url).netloc}\r\n".encode())
        while not stop.wait(DEADLINE / 4):
            for sock in socks:
                try:
                    sock.sendall(b"X-Slow: 1\r\n")
                except OSError:
                    pass

    feeder = threading.Thread(target=trickle, daemon=True)
    feeder.start()
    try:
        time.sleep(DEADLINE / 2)
        with httpx.Client(base_url=url, timeout=10, headers=owner) as client:
            assert client.get("/api/v1/ready").status_code == 200
            session = client.post("/mcp", json=initialize("good"), headers=JSON)
            assert session.status_code == 200
            assert client.delete("/mcp", headers={"Mcp-Session-Id": session.headers["mcp-session-id"]}).status_code \
                == 204
        alive = sum(1 for s in socks if s.fileno() != -1)
        assert alive == 200
        closed = 0
        for sock in socks:
            sock.settimeout(DEADLINE * 5)
            data = b""
            try:
                while chunk := sock.recv(65536):
                    data += chunk
            except (ConnectionResetError, TimeoutError, socket.timeout):
                pass
            closed += 1 if b" 200 " not in data.split(b"\r\n", 1)[0] else 0
        assert closed == 200
    finally:
        stop.set()
        feeder.join(timeout=10)
        for sock in socks:
            sock.close()


# -- Host and Origin -------------------------------------------------------------------------------------------

# A trailing SP or HTAB is optional whitespace that h11 strips before any application code sees the value
# (RFC 9110 §5.5): `Host: 127.0.0.1:<port> ` is our own host. Whatever else trails is not.
@pytest.mark.parametrize("host", ["localhost:1@evil", "[::1].evil.com", "127.0.0.1.evil.com", "localhost:1",
                                  "127.0.0.1:{port}\x0c", "localhost\x0b", "127.0.0.1:{port}x", "127.0.0.1 :{port}",
                                  "localhost\t:{port}", "evil.com:{port}",
                                  "[::1]:{port}x", "localhost:{port}:{port}", "", "LOCALHOST.:{port}"])
def test_a_forged_host_is_misdirected(served: tuple[McpProcess, str, dict[str, str]], host: str) -> None:
    """1. raw requests whose Host is close to ours but not ours. Result: 421 with a JSON body, token or not."""
    _, url, owner = served
    port = urlsplit(url).port
    with connect(url) as sock:
        head = f"GET /api/v1/episodes HTTP/1.1\r\nHost: {host.format(port=port)}\r\n" \
               f"Authorization: {owner['Authorization']}\r\n\r\n"
        sock.sendall(head.encode("latin-1"))
        status, headers, body = read_response(sock)
    assert status in (421, 400), body  # h11 itself refuses some (a bare 400 before any app code)
    if status == 421:
        assert json.loads(body)["error"]["code"] == "misdirected"


def test_our_own_host_names_pass(served: tuple[McpProcess, str, dict[str, str]]) -> None:
    _, url, owner = served
    port = urlsplit(url).port
    with httpx.Client(base_url=url, timeout=10, headers=owner) as client:
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", "localhost", "127.0.0.1", f"LocalHost:{port}"):
            assert client.get("/api/v1/episodes", headers={"Host": host}).status_code == 200, host


def test_only_our_own_origin_passes(served: tuple[McpProcess, str, dict[str, str]]) -> None:
    """Origin must be exactly this server (scheme, host and port): not http://localhost:<any port>."""
    _, url, owner = served
    port = urlsplit(url).port
    with httpx.Client(base_url=url, timeout=10, headers=owner) as client:
        for origin in (f"http://127.0.0.1:{port}", f"http://localhost:{port}"):
            assert client.get("/api/v1/episodes", headers={"Origin": origin}).status_code == 200, origin
        for origin in (f"http://localhost:{port + 1}", "http://localhost:3000", "http://localhost",
                       f"https://127.0.0.1:{port}", f"http://127.0.0.1:{port}/", f"http://evil.com:{port}",
                       f"http://localhost:{port}@evil.com", "null", "file://", f"http://[::1].evil.com:{port}"):
            refused = client.post("/mcp", json=initialize(), headers={**JSON, "Origin": origin})
            assert refused.status_code == 403, origin
            assert refused.json()["error"]["code"] == "forbidden"


def _outside_address() -> str | None:
    """An address of this machine that is not loopback, if it has one (no packet is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))
            address = str(probe.getsockname()[0])
        except OSError:
            return None
    return None if address.startswith("127.") or address == "0.0.0.0" else address


def test_bound_to_every_interface_localhost_is_only_for_loopback(initialised_repo: Path) -> None:
    """1. a shared server with --http-host 0.0.0.0. Result: over loopback `Host: localhost` and 127.0.0.1 still
    pass (the owner's bridges use them); over another address of this machine `Host: localhost` is 421 (it does
    not name the address the request reached) and the address itself passes."""
    with McpProcess(initialised_repo, "--http-port", "0", "--http-host", "0.0.0.0") as proc:
        proc.wait_stderr("listening on http://")
        proc.request(initialize("owner"))
        owner = auth(initialised_repo)
        port = int(proc.stderr.split("listening on http://", 1)[1].split()[0].rsplit(":", 1)[1])
        loop = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=loop, timeout=10, headers=owner) as client:
            assert client.get("/api/v1/episodes", headers={"Host": f"localhost:{port}"}).status_code == 200
            assert client.get("/api/v1/episodes", headers={"Host": "0.0.0.0"}).status_code == 421
        outside = _outside_address()
        if outside is not None:
            with httpx.Client(base_url=f"http://{outside}:{port}", timeout=10, headers=owner) as client:
                assert client.get("/api/v1/episodes", headers={"Host": "localhost"}).status_code == 421
                assert client.get("/api/v1/episodes", headers={"Host": f"localhost:{port}"}).status_code == 421
                assert client.get("/api/v1/episodes").status_code == 200
                assert client.get("/api/v1/episodes", headers={"Authorization": "Bearer x"}).status_code == 401
        proc.close_stdin()
        assert proc.wait() == 0


# -- OpenAPI, protocol, schemas --------------------------------------------------------------------------------

def test_openapi_documents_every_status_a_route_can_answer(served: tuple[McpProcess, str, dict[str, str]]) -> None:
    _, url, owner = served
    with httpx.Client(base_url=url, timeout=10, headers=owner) as client:
        doc = client.get("/openapi.json").json()
    assert doc["components"]["securitySchemes"]["bearer"] == {"type": "http", "scheme": "bearer",
                                                              "description": doc["components"]["securitySchemes"]
                                                              ["bearer"]["description"]}
    assert doc["security"] == [{"bearer": []}]
    for path, item in doc["paths"].items():
        for method, op in item.items():
            codes = set(op["responses"])
            assert {"403", "421"} <= codes, (path, method)
            if path == "/api/v1/live":
                assert op["security"] == [] and "401" not in codes
            else:
                assert "401" in codes, (path, method)
            if "requestBody" in op:
                assert {"408", "413", "415"} <= codes, (path, method)
            for response in op["responses"].values():
                assert "application/json" in response["content"], (path, method)
    codes = doc["components"]["schemas"]["Error"]["properties"]["error"]["properties"]["code"]["enum"]
    assert {"unauthorized", "misdirected", "too_large", "timeout", "unsupported_media_type"} <= set(codes)


def test_a_modern_request_without_its_meta_version_is_invalid_params(
        served: tuple[McpProcess, str, dict[str, str]]) -> None:
    """2026-07-28 (basic/index): a request missing a required `_meta` field is -32602, HTTP 400 — also when the
    MCP-Protocol-Version header says 2026-07-28 and there is no `_meta` at all."""
    _, url, owner = served
    headers = {**JSON, **owner, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}
    with httpx.Client(base_url=url, timeout=10) as client:
        for params in ({}, {"_meta": {}}, {"_meta": {"io.modelcontextprotocol/clientCapabilities": {}}}, None):
            message: dict[str, Any] = {"jsonrpc": "2.0", "id": 9, "method": "tools/list"}
            if params is not None:
                message["params"] = params
            answer = client.post("/mcp", json=message, headers=headers)
            assert answer.status_code == 400, (params, answer.text)
            assert answer.json()["id"] == 9 and answer.json()["error"]["code"] == -32602, (params, answer.text)
        legacy = client.post("/mcp", json=call(7, "majordomus_episodes"),
                             headers={**JSON, **owner, "MCP-Protocol-Version": "2025-11-25"})
        assert legacy.status_code == 400 and "session_required" in legacy.json()["error"]["message"]


def test_tool_schemas_refuse_a_blank_external_id_and_intent(served: tuple[McpProcess, str, dict[str, str]]) -> None:
    proc, _, _ = served
    tools = {t["name"]: t for t in proc.request({"jsonrpc": "2.0", "id": 3, "method": "tools/list"})["result"]["tools"]}
    for name, argument in (("majordomus_session_attach", "external_id"), ("majordomus_session_detach", "external_id"),
                           ("majordomus_episodes", "external_id"), ("majordomus_announce", "intent")):
        schema = tools[name]["inputSchema"]["properties"][argument]
        assert schema["minLength"] == 1 and schema["pattern"], name
        for blank in ("", " ", "\t \u3000"):
            with pytest.raises(jsonschema.ValidationError):
                jsonschema.validate({argument: blank, "scope": []}, tools[name]["inputSchema"])
    refused = proc.request(call(4, "majordomus_session_attach", {"external_id": ""}))["result"]
    assert refused["isError"] is True
    assert refused["content"][0]["text"] == ("argument 'external_id' is required and must not be blank: it is what a "
                                             "reconnecting client is recognised by")


def test_the_listing_refuses_an_external_id_its_schema_refuses(served: tuple[McpProcess, str, dict[str, str]]) -> None:
    """schemathesis found it: `GET /api/v1/episodes?external_id=<a control character>` was served (200)."""
    _, url, owner = served
    with httpx.Client(base_url=url, timeout=10, headers=owner) as client:
        for value in ("o*\x0fh", " ", "a\nb"):
            refused = client.get("/api/v1/episodes", params={"external_id": value})
            assert refused.status_code == 400 and refused.json()["error"]["code"] == "invalid_input", value
        assert client.get("/api/v1/episodes", params={"external_id": " fine "}).status_code == 200


def test_a_forwarded_header_never_renames_the_loopback_client(served: tuple[McpProcess, str, dict[str, str]]) -> None:
    """uvicorn's proxy-headers layer (on by default) trusted `X-Forwarded-For` from 127.0.0.1: a local caller could
    call itself remote, and a proxy could make a remote caller local. Nothing stands between a client and this
    socket, so the header is no one's word; nor does the server name itself in a `server` header."""
    _, url, token = served
    detach = httpx.post(f"{url}/api/v1/episodes/detach", json={"external_id": "nobody-here"},
                        headers={**token, "X-Forwarded-For": "192.0.2.10", "X-Forwarded-Proto": "https"})
    assert detach.status_code == 404, detach.text  # a loopback caller: the capability ran, and found no episode
    assert "server" not in detach.headers
