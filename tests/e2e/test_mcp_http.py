"""The HTTP surfaces of a real shared server: /mcp in both eras, /api/v1, /openapi.json, /swagger, Host and Origin."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcp_support import (
    McpProcess,
    call,
    initialize,
    modern,
    modern_headers,
    open_file,
    set_policy,
    wait_for,
)

JSON = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


@pytest.fixture
def server(initialised_repo: Path) -> Iterator[tuple[McpProcess, httpx.Client]]:
    set_policy(initialised_repo, episodes__stateless_ttl_seconds=1, episodes__reattach_grace_seconds=600)
    with McpProcess(initialised_repo, "--http-port", "0", env={"MAJORDOMUS_HTTP_IDLE_SECONDS": "1.5"}) as proc:
        url = proc.url()
        proc.request(initialize("owner"))
        with httpx.Client(base_url=url, timeout=10, headers=proc.auth()) as client:
            yield proc, client
        proc.close_stdin()
        assert proc.wait() == 0


def episodes(client: httpx.Client) -> dict[str, dict[str, Any]]:
    return {e["external_id"]: e for e in client.get("/api/v1/episodes").json()["episodes"]}


def open_session(client: httpx.Client, name: str = "http-client") -> str:
    response = client.post("/mcp", json=initialize(name, "2025-11-25"), headers=JSON)
    assert response.status_code == 200
    assert response.json()["result"]["protocolVersion"] == "2025-11-25"
    return response.headers["mcp-session-id"]


def test_a_legacy_session_attaches_and_delete_detaches(server: tuple[McpProcess, httpx.Client],
                                                       initialised_repo: Path) -> None:
    _, client = server
    sid = open_session(client)
    headers = {**JSON, "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
    note = client.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    assert note.status_code == 202 and note.content == b""
    attach = client.post("/mcp", json=call(2, "majordomus_session_attach", {"external_id": "http-thread"}),
                         headers=headers).json()
    assert attach["result"]["structuredContent"]["episode"]["state"] == "open"
    assert open_file(initialised_repo, "http-thread")["held_by"] is not None  # type: ignore[index]
    assert client.delete("/mcp", headers={"Mcp-Session-Id": sid}).status_code == 204
    assert episodes(client)["http-thread"]["state"] == "detached"
    assert open_file(initialised_repo, "http-thread")["detached_at"]  # type: ignore[index]
    gone = client.post("/mcp", json=call(3, "majordomus_episodes"), headers=headers)
    assert gone.status_code == 404 and gone.json()["id"] == 3
    assert client.delete("/mcp", headers={"Mcp-Session-Id": sid}).status_code == 404


def test_a_request_without_a_session_is_refused(server: tuple[McpProcess, httpx.Client]) -> None:
    _, client = server
    response = client.post("/mcp", json=call(7, "majordomus_episodes"), headers=JSON)
    assert response.status_code == 400 and "session_required" in response.json()["error"]["message"]
    unknown = client.post("/mcp", json=call(8, "majordomus_episodes"), headers={**JSON, "Mcp-Session-Id": "nope"})
    assert unknown.status_code == 404


def test_get_on_mcp_is_405_and_a_non_json_body_is_415(server: tuple[McpProcess, httpx.Client]) -> None:
    _, client = server
    assert client.get("/mcp").status_code == 405
    assert client.post("/mcp", content=b"x", headers={"Content-Type": "text/plain"}).status_code == 415
    bad = client.post("/mcp", content=b"{nope", headers=JSON)
    assert bad.status_code == 400 and bad.json()["error"]["code"] == -32700


@pytest.mark.slow
def test_an_idle_session_expires_and_its_episode_detaches(server: tuple[McpProcess, httpx.Client]) -> None:
    _, client = server
    sid = open_session(client)
    client.post("/mcp", json=call(2, "majordomus_session_attach", {"external_id": "idle-thread"}),
                headers={**JSON, "Mcp-Session-Id": sid})
    assert episodes(client)["idle-thread"]["state"] == "open"
    wait_for(lambda: episodes(client)["idle-thread"]["state"] == "detached", 15, "the idle session to expire")
    after = client.post("/mcp", json=call(3, "majordomus_episodes"), headers={**JSON, "Mcp-Session-Id": sid})
    assert after.status_code == 404


def post_modern(client: httpx.Client, message: dict[str, Any], **overrides: str) -> httpx.Response:
    return client.post("/mcp", json=message, headers={**modern_headers(message), **overrides})


@pytest.mark.slow
def test_stateless_requests_attach_by_external_id_and_expire_after_the_ttl(
        server: tuple[McpProcess, httpx.Client], initialised_repo: Path) -> None:
    _, client = server
    discover = post_modern(client, modern(1, "server/discover")).json()["result"]
    assert "2026-07-28" in discover["supportedVersions"] and discover["resultType"] == "complete"
    assert {"ttlMs", "cacheScope", "capabilities", "serverInfo"} <= set(discover)
    tools = post_modern(client, modern(2, "tools/list")).json()["result"]
    assert tools["resultType"] == "complete" and tools["cacheScope"] == "public" and tools["ttlMs"] >= 0
    attach = post_modern(client, modern(3, "tools/call", {"name": "majordomus_session_attach",
                                                          "arguments": {"external_id": "stateless-thread"}}))
    result = attach.json()["result"]
    assert result["resultType"] == "complete" and result["structuredContent"]["episode"]["state"] == "open"
    beat = post_modern(client, modern(4, "tools/call", {"name": "majordomus_episodes",
                                                        "arguments": {"external_id": "stateless-thread"}}))
    assert beat.json()["result"]["structuredContent"]["mine"]["external_id"] == "stateless-thread"
    refused = post_modern(client, modern(5, "tools/call", {"name": "majordomus_session_detach", "arguments": {}}))
    assert refused.json()["result"]["isError"] is True
    assert "name the episode to close" in refused.json()["result"]["content"][0]["text"]
    wait_for(lambda: episodes(client)["stateless-thread"]["state"] == "detached", 15, "the stateless TTL")
    # the reaper's thread detaches on the board first, then writes the mark outside the board's lock
    wait_for(lambda: (open_file(initialised_repo, "stateless-thread") or {}).get("detached_at"), 5,
             "detached_at in the open file")
    closed = post_modern(client, modern(6, "tools/call", {"name": "majordomus_session_detach",
                                                          "arguments": {"external_id": "stateless-thread"}}))
    assert closed.json()["result"]["structuredContent"]["episode"]["repository"].startswith("episode closed (closed")


def test_stateless_header_and_version_errors(server: tuple[McpProcess, httpx.Client]) -> None:
    _, client = server
    message = modern(1, "tools/list")
    mismatch = post_modern(client, message, **{"MCP-Protocol-Version": "2025-11-25"})
    assert mismatch.status_code == 400 and mismatch.json()["error"]["code"] == -32020
    wrong_name = post_modern(client, modern(2, "tools/call", {"name": "majordomus_peers"}), **{"Mcp-Name": "x"})
    assert wrong_name.json()["error"]["code"] == -32020
    old = modern(3, "tools/list", version="1900-01-01")
    unsupported = post_modern(client, old)
    assert unsupported.status_code == 400
    error = unsupported.json()["error"]
    assert error["code"] == -32022 and error["data"]["requested"] == "1900-01-01"
    assert "2026-07-28" in error["data"]["supported"]
    unknown = post_modern(client, modern(4, "resources/list"))
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == -32601


def test_api_routes_answer_with_the_registry_errors(server: tuple[McpProcess, httpx.Client]) -> None:
    _, client = server
    listing = client.get("/api/v1/episodes")
    assert listing.status_code == 200 and "mine" not in listing.json()
    attach = client.post("/api/v1/episodes/attach", json={"external_id": "x"})
    assert attach.status_code == 422
    assert attach.json()["error"] == {
        "code": "refused", "message": "attach needs an MCP session: this call came through an interface with no "
                                      "connection to bind an episode to (call the majordomus_session_attach tool)"}
    blank = client.post("/api/v1/episodes/detach", json={"external_id": "  "})
    assert blank.status_code == 400 and blank.json()["error"]["message"] == (
        "argument 'external_id' is required and must not be blank: it is what a reconnecting client is recognised by")
    assert client.post("/api/v1/episodes/detach", json={}).status_code == 422
    missing = client.post("/api/v1/episodes/detach", json={"external_id": "nope"})
    assert missing.status_code == 404 and missing.json()["error"]["message"] == "no episode 'nope' on this server"
    assert client.post("/api/v1/episodes/detach", json={"bogus": 1}).status_code == 400
    assert client.get("/api/v1/episodes/attach").status_code == 405
    assert client.post("/api/v1/episodes/detach", content=b"x", headers={"Content-Type": "text/plain"}).status_code \
        == 415
    peers = client.get("/api/v1/peers").json()
    assert peers["count"] == 1 and "you" not in peers


def test_forged_host_and_origin_are_refused(server: tuple[McpProcess, httpx.Client]) -> None:
    _, client = server
    assert client.get("/api/v1/live", headers={"Host": "evil.example:80"}).status_code == 421
    assert client.post("/mcp", json=initialize(), headers={**JSON, "Host": "attacker.test"}).status_code == 421
    forged = client.post("/mcp", json=initialize(), headers={**JSON, "Origin": "http://evil.example"})
    assert forged.status_code == 403
    assert client.get("/api/v1/live", headers={"Origin": "null"}).status_code == 403
    port = client.base_url.port
    assert client.get("/api/v1/live", headers={"Origin": f"http://localhost:{port}"}).status_code == 200
    assert client.get("/api/v1/live", headers={"Host": f"localhost:{port}"}).status_code == 200


def test_openapi_swagger_home_and_health(server: tuple[McpProcess, httpx.Client]) -> None:
    _, client = server
    doc = client.get("/openapi.json").json()
    assert doc["openapi"].startswith("3.1")
    assert doc["paths"]["/api/v1/episodes/attach"]["post"]["operationId"] == "episodes.attach"
    page = client.get("/swagger")
    assert page.status_code == 200 and "/swagger/swagger-ui-bundle.js" in page.text
    assert "http://" not in page.text and "https://" not in page.text  # no CDN: works offline
    bundle = client.get("/swagger/swagger-ui-bundle.js")
    assert bundle.status_code == 200 and len(bundle.content) > 100_000
    assert client.get("/swagger/swagger-ui.css").status_code == 200
    assert client.get("/swagger/..%2Fserver.py").status_code == 404
    home = client.get("/").json()
    assert {"mcp", "api", "openapi", "swagger", "live", "ready"} <= set(home["surfaces"])
    live = client.get("/api/v1/live").json()
    assert live["live"] is True and live["stopping"] is False
    ready = client.get("/api/v1/ready")
    assert ready.status_code == 200 and ready.json()["ready"] is True
