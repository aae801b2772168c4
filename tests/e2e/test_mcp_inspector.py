"""The MCP Inspector CLI (a client we did not write) lists and calls our tools over stdio and over HTTP.

Skipped only where `npx` is absent; where it is present the Inspector must run (CI included).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mcp_support import MAJORDOMUS_MCP, McpProcess, TokenProxy, initialize

NPX = shutil.which("npx")
pytestmark = [pytest.mark.skipif(NPX is None, reason="npx is not installed"), pytest.mark.network, pytest.mark.slow]
# The tests point HOME into tmp_path; keep npm's cache where it survives between tests and runs.
NPM_CACHE = os.environ.get("npm_config_cache") or str(Path(os.path.expanduser("~")) / ".npm")
INSPECTOR = "@modelcontextprotocol/inspector"


NPM_ENV = {"npm_config_cache": NPM_CACHE, "npm_config_update_notifier": "false"}
NETWORK_TROUBLE = ("ENOTFOUND", "EAI_AGAIN", "ETIMEDOUT", "ECONNREFUSED", "ECONNRESET", "network")


@pytest.fixture(scope="module", autouse=True)
def registry_reachable() -> None:
    """The Inspector comes from the npm registry. If the registry cannot be reached at all, that is the
    network, not our server: skip and say so. Any other failure below fails the test."""
    try:
        done = subprocess.run(["npm", "view", INSPECTOR, "version"], capture_output=True, text=True, timeout=120,
                              env={**os.environ, **NPM_ENV})
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"the npm registry did not answer ({exc}); the Inspector cannot be fetched here")
    if done.returncode != 0 and any(word in done.stderr for word in NETWORK_TROUBLE):
        pytest.skip(f"the npm registry is unreachable: {done.stderr.strip().splitlines()[-1]}")


@pytest.fixture(scope="module")
def inspector(registry_reachable: None) -> Callable[..., Any]:
    """Run the Inspector CLI: its `mcp-inspector` bin, as `npx -y @modelcontextprotocol/inspector` fetches (or finds
    in its cache) and runs it, resolved once per module so that each call is that bin, not another `npm exec`.
    npx installs into the shared npm cache, and two workers (or two checkouts' suites) resolving at once could race
    there: the resolve holds an advisory lock on the npx executable itself (nothing is written for the lock)."""
    assert NPX is not None
    with open(os.path.realpath(NPX), "rb") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = subprocess.run([NPX, "-y", "-p", INSPECTOR, "-c", "command -v mcp-inspector"], capture_output=True,
                               text=True, timeout=240, env={**os.environ, **NPM_ENV})
    assert found.returncode == 0 and found.stdout.strip(), found.stdout + found.stderr
    bin_path = found.stdout.strip().splitlines()[-1]

    def run(*args: str, cwd: Path) -> Any:
        done = subprocess.run([bin_path, "--cli", *args], cwd=cwd, capture_output=True, text=True, timeout=240,
                              env={**os.environ, **NPM_ENV})
        assert done.returncode == 0, done.stdout + done.stderr
        return json.loads(done.stdout)

    return run


@pytest.mark.slow
def test_inspector_lists_and_calls_over_stdio(initialised_repo: Path, inspector: Callable[..., Any]) -> None:
    tools = inspector(str(MAJORDOMUS_MCP), "--standalone", "--method", "tools/list", cwd=initialised_repo)
    assert {t["name"] for t in tools["tools"]} >= {"majordomus_session_attach", "majordomus_episodes"}
    result = inspector(str(MAJORDOMUS_MCP), "--standalone", "--method", "tools/call", "--tool-name",
                       "majordomus_session_attach", "--tool-arg", "external_id=inspector-thread", cwd=initialised_repo)
    assert result["isError"] is False
    assert result["structuredContent"]["episode"]["external_id"] == "inspector-thread"


@pytest.mark.slow
def test_inspector_lists_and_calls_over_http(initialised_repo: Path, inspector: Callable[..., Any]) -> None:
    # The Inspector's HTTP session may end without a DELETE: a short idle expiry lets the server stop after it.
    with McpProcess(initialised_repo, "--http-port", "0", env={"MAJORDOMUS_HTTP_IDLE_SECONDS": "1"}) as server:
        server.request(initialize("holder"))
        # the Inspector CLI sends no header of ours: a relay adds the owner's token, as a person's proxy would
        with TokenProxy(server.url(), server.auth()) as url:
            tools = inspector(f"{url}/mcp", "--transport", "http", "--method", "tools/list", cwd=initialised_repo)
            assert "majordomus_peers" in {t["name"] for t in tools["tools"]}
            result = inspector(f"{url}/mcp", "--transport", "http", "--method", "tools/call", "--tool-name",
                               "majordomus_episodes", cwd=initialised_repo)
        assert result["isError"] is False and result["structuredContent"]["open"] == 0
        server.close_stdin()
        assert server.wait() == 0
