"""The HTTP app in process (no socket): a caller from another machine may read but never change state."""

from __future__ import annotations

from pathlib import Path

import anyio
import httpx

from majordomus.layout import Layout
from majordomus.mcp.http import Guard, build_app
from majordomus.mcp.runtime import Runtime, Settings

TOKEN = "t" * 43


def ask(repo: Path, client_host: str, method: str, path: str, base: str = "http://127.0.0.1:8741",
        **kw: object) -> httpx.Response:
    layout = Layout(repo)
    rt = Runtime(layout, Settings(grace_seconds=900, stateless_ttl_seconds=120, http_idle_seconds=90,
                                  tick_seconds=30))
    rt.recovered.set()
    app = Guard(build_app(rt), TOKEN)

    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=app, client=(client_host, 40000))
        async with httpx.AsyncClient(transport=transport, base_url=base,
                                     headers={"Authorization": f"Bearer {TOKEN}"}) as client:
            return await client.request(method, path, **kw)  # type: ignore[arg-type]

    return anyio.run(go)


def test_a_non_loopback_caller_is_refused_a_mutation(initialised_repo: Path) -> None:
    refused = ask(initialised_repo, "192.0.2.10", "POST", "/api/v1/episodes/detach", json={"external_id": "x"})
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden"


def test_a_non_loopback_caller_may_read(initialised_repo: Path) -> None:
    assert ask(initialised_repo, "192.0.2.10", "GET", "/api/v1/episodes").status_code == 200


def test_a_loopback_caller_reaches_the_capability(initialised_repo: Path) -> None:
    found = ask(initialised_repo, "127.0.0.1", "POST", "/api/v1/episodes/detach", json={"external_id": "x"})
    assert found.status_code == 404


def test_a_non_loopback_mcp_tool_call_that_mutates_is_a_forbidden_tool_error(initialised_repo: Path) -> None:
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": "majordomus_session_detach", "arguments": {"external_id": "x"},
                          "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                    "io.modelcontextprotocol/clientCapabilities": {}}}}
    headers = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call",
               "Mcp-Name": "majordomus_session_detach"}
    answer = ask(initialised_repo, "192.0.2.10", "POST", "/mcp", json=message, headers=headers).json()
    assert answer["result"]["isError"] is True
    assert answer["result"]["_meta"]["majordomus"]["error"]["code"] == "forbidden"


def test_bound_to_every_interface_a_request_from_outside_must_name_the_address_it_reached(
        initialised_repo: Path) -> None:
    """The ASGI scope's `server` is the address a request reached: localhost is only for loopback."""
    outside = "http://192.0.2.1:8741"
    assert ask(initialised_repo, "192.0.2.10", "GET", "/api/v1/episodes", base=outside).status_code == 200
    refused = ask(initialised_repo, "192.0.2.10", "GET", "/api/v1/episodes", base=outside,
                  headers={"Host": "localhost:8741"})
    assert refused.status_code == 421 and refused.json()["error"]["code"] == "misdirected"
    assert ask(initialised_repo, "127.0.0.1", "GET", "/api/v1/episodes", headers={"Host": "localhost"}).status_code \
        == 200


def test_a_json_body_too_deep_for_the_parser_is_a_400_not_a_500(initialised_repo: Path) -> None:
    deep = ask(initialised_repo, "127.0.0.1", "POST", "/api/v1/episodes/detach", content=b"[" * 100_000,
               headers={"Content-Type": "application/json"})
    assert deep.status_code == 400 and deep.json()["error"]["code"] == "invalid_input"
