"""The official `mcp` SDK as a real client of `majordomus-mcp`, over stdio and over HTTP, in each of its modes."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import jsonschema
import pytest

from mcp_support import MAJORDOMUS_MCP, McpProcess, auth, initialize, set_policy, wait_for

Client = pytest.importorskip("mcp.client").Client
StdioServerParameters = pytest.importorskip("mcp.client.stdio").StdioServerParameters
streamable_http_client = pytest.importorskip("mcp.client.streamable_http").streamable_http_client

MODES = ["legacy", "auto", "2026-07-28"]


async def exercise(client: Any, external_id: str, *, name_on_detach: bool) -> dict[str, Any]:
    """List the tools, attach, list, detach; every structuredContent checked against its outputSchema."""
    listing = await client.list_tools()
    schemas = {tool.name: tool.output_schema for tool in listing.tools}
    assert {"majordomus_session_attach", "majordomus_session_detach", "majordomus_episodes", "majordomus_peers",
            "majordomus_announce"} <= set(schemas)

    async def call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = await client.call_tool(tool, arguments)
        assert result.is_error is False, result
        jsonschema.validate(result.structured_content, schemas[tool])
        return result.structured_content

    attached = await call("majordomus_session_attach", {"external_id": external_id})
    assert attached["episode"]["state"] == "open" and attached["resumed"] is False
    episodes = await call("majordomus_episodes", {"external_id": external_id} if name_on_detach else {})
    assert episodes["mine"]["external_id"] == external_id
    peers = await call("majordomus_peers", {})
    assert peers["count"] >= 1
    closed = await call("majordomus_session_detach", {"external_id": external_id} if name_on_detach else {})
    assert closed["episode"]["repository"].startswith("episode closed (closed, reason detach)")
    return closed


@pytest.mark.parametrize("mode", MODES)
def test_sdk_client_over_stdio(initialised_repo: Path, mode: str) -> None:
    params = StdioServerParameters(command=str(MAJORDOMUS_MCP), args=["--standalone"], cwd=str(initialised_repo),
                                   env=dict(os.environ))

    async def main() -> None:
        async with Client(params, mode=mode, client_info=None) as client:
            assert client.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
            await exercise(client, f"sdk-stdio-{mode}", name_on_detach=False)

    anyio.run(main)


create_mcp_http_client = pytest.importorskip("mcp.shared._httpx_utils").create_mcp_http_client
Shared = tuple[str, dict[str, str]]


@pytest.fixture
def shared(initialised_repo: Path) -> Iterator[Shared]:
    """The shared server's URL and the owner's token header (every request but /api/v1/live carries it)."""
    set_policy(initialised_repo, episodes__stateless_ttl_seconds=1)
    with McpProcess(initialised_repo, "--http-port", "0", env={"MAJORDOMUS_HTTP_IDLE_SECONDS": "1.5"}) as server:
        url = server.url()
        server.request(initialize("holder"))
        yield url, auth(initialised_repo)
        server.close_stdin()
        assert server.wait() == 0


def episode_state(shared: Shared, external_id: str) -> str | None:
    url, owner = shared
    episodes = httpx.get(f"{url}/api/v1/episodes", timeout=10, headers=owner).json()["episodes"]
    return next((e["state"] for e in episodes if e["external_id"] == external_id), None)


@pytest.mark.parametrize("mode", MODES)
def test_sdk_client_over_http(shared: Shared, mode: str) -> None:
    url, owner = shared

    async def main() -> None:
        async with create_mcp_http_client(headers=owner) as http, \
                Client(streamable_http_client(f"{url}/mcp", http_client=http), mode=mode) as client:
            legacy = mode == "legacy"
            assert client.protocol_version == ("2025-11-25" if legacy else "2026-07-28")
            await exercise(client, f"sdk-http-{mode}", name_on_detach=not legacy)

    anyio.run(main)


def test_a_legacy_http_client_that_exits_detaches_its_episode(shared: Shared) -> None:
    """1. a legacy client attaches and leaves (the SDK sends DELETE). Result: detached, not closed."""
    url, owner = shared

    async def main() -> None:
        async with create_mcp_http_client(headers=owner) as http, \
                Client(streamable_http_client(f"{url}/mcp", http_client=http), mode="legacy") as client:
            result = await client.call_tool("majordomus_session_attach", {"external_id": "sdk-leaves"})
            assert result.is_error is False
            assert episode_state(shared, "sdk-leaves") == "open"

    anyio.run(main)
    wait_for(lambda: episode_state(shared, "sdk-leaves") == "detached", 5, "the DELETE to detach")


@pytest.mark.slow
def test_a_legacy_http_client_that_never_deletes_is_detached_by_expiry(shared: Shared) -> None:
    url, owner = shared

    async def main() -> None:
        async with create_mcp_http_client(headers=owner) as http, \
                Client(streamable_http_client(f"{url}/mcp", http_client=http, terminate_on_close=False),
                       mode="legacy") as client:
            await client.call_tool("majordomus_session_attach", {"external_id": "sdk-vanishes"})
        assert episode_state(shared, "sdk-vanishes") == "open"

    anyio.run(main)
    wait_for(lambda: episode_state(shared, "sdk-vanishes") == "detached", 15, "the idle expiry")


@pytest.mark.slow
def test_a_stateless_http_client_is_detached_after_the_ttl(shared: Shared) -> None:
    url, owner = shared

    async def main() -> None:
        async with create_mcp_http_client(headers=owner) as http, \
                Client(streamable_http_client(f"{url}/mcp", http_client=http), mode="2026-07-28") as client:
            await client.call_tool("majordomus_session_attach", {"external_id": "sdk-stateless"})
        assert episode_state(shared, "sdk-stateless") == "open"

    anyio.run(main)
    wait_for(lambda: episode_state(shared, "sdk-stateless") == "detached", 15, "the stateless TTL")


def test_a_refusal_reaches_the_sdk_as_is_error_with_its_code(initialised_repo: Path) -> None:
    params = StdioServerParameters(command=str(MAJORDOMUS_MCP), args=["--standalone"], cwd=str(initialised_repo),
                                   env=dict(os.environ))

    async def main() -> None:
        async with Client(params, mode="legacy") as client:
            result = await client.call_tool("majordomus_session_detach", {})
            assert result.is_error is True and result.structured_content is None
            assert result.meta["majordomus"]["error"]["code"] == "refused"
            assert "holds no episode" in result.content[0].text

    anyio.run(main)
