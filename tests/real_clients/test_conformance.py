"""The MCP conformance suite (`@modelcontextprotocol/conformance`, a client we did not write) against the shared
server over HTTP, with the scenarios this server is expected to fail committed beside this file, each with its
reason (conformance_expected.yaml). The suite fails the run on an unexpected failure and on a listed scenario
that passes, so the list cannot go stale.

The suite sends no header of ours, so a loopback relay adds the owner's token (as a person's proxy would) and
stands for the server's origin; the suite's forged Host and Origin still reach the server, whose DNS-rebinding
scenario must pass. The suite is installed once from npm into a cache under the virtualenv, run with the pinned
Node of the real clients; only an unreachable registry skips it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mcp_support import McpProcess, TokenProxy, initialize
from real_clients.pinned import Installed, RegistryUnreachable, install_pins, pinned_at

SUITE, VERSION = "@modelcontextprotocol/conformance", "0.1.16"
CACHE = Path(sys.prefix) / "conformance"
EXPECTED = Path(__file__).with_name("conformance_expected.yaml")
PASSING = {"server-initialize", "ping", "tools-list", "dns-rebinding-protection"}


def ensure_suite(cache: Path = CACHE) -> Path:
    """The suite's executable, installed (once, then found in the cache) at its pinned version."""
    if not pinned_at(cache, "pin.json", {SUITE: VERSION}, "node_modules/.bin/conformance"):
        install_pins(cache, "majordomus-conformance", {SUITE: VERSION}, "pin.json")
    return cache / "node_modules" / ".bin" / "conformance"


@pytest.fixture(scope="module")
def suite(installed: Installed) -> Path:
    try:
        return ensure_suite()
    except RegistryUnreachable as exc:
        pytest.skip(f"The conformance suite is skipped: {exc}, so it cannot be installed.")


def test_the_conformance_suite_passes_all_but_the_committed_expected_failures(initialised_repo: Path, suite: Path,
                                                                              installed: Installed,
                                                                              tmp_path: Path) -> None:
    env = {**os.environ, "PATH": f"{installed.path_entry()}{os.pathsep}{os.environ.get('PATH', '')}"}
    with McpProcess(initialised_repo, "--http-port", "0", env={"MAJORDOMUS_HTTP_IDLE_SECONDS": "5"}) as server:
        server.request(initialize("holder"))
        with TokenProxy(server.url(), server.auth()) as url:
            done = subprocess.run([str(suite), "server", "--url", f"{url}/mcp", "--expected-failures", str(EXPECTED),
                                   "-o", str(tmp_path / "results")], capture_output=True, text=True, env=env,
                                  timeout=900, cwd=tmp_path)
        assert server.proc.poll() is None, server.stderr  # the server outlived every scenario
    summary = re.findall(r"^[✓✗] (\S+): (\d+) passed, (\d+) failed", done.stdout, re.M)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    passed = {name for name, _, failed in summary if failed == "0"}
    assert passed == PASSING, summary  # what we claim passes, passes (and the summary was read at all)
