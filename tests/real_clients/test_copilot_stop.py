"""Copilot's way of stopping an MCP server, reproduced against `majordomus-mcp` alone: SIGTERM, then SIGKILL
3 ms later (REAL-CLIENTS.md, "Timing and process facts"). Needs no npm client.

1. `majordomus-mcp` serves and a client attaches an episode; 2. SIGTERM; 3. SIGKILL 3 ms after it; five
times, each in a fresh repository. What the server does on SIGTERM must be durable at once, every time: the
episode detached (its open file says when, held by nobody) and the lease gone. (One stop alone sometimes
beats the kill by luck; five in a row do not, until the product makes it durable.)
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from mcp_support import LEASE, McpProcess, call, initialize, open_file
from real_clients.known import COPILOT_SIGKILL, racing
from support import make_initialised

COPILOT_KILL_AFTER_SECONDS = 0.003
TRIALS = 5


def stop_as_copilot_does(server: McpProcess) -> None:
    server.proc.send_signal(signal.SIGTERM)
    time.sleep(COPILOT_KILL_AFTER_SECONDS)
    try:
        os.kill(server.proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass  # it was already gone: nothing left to kill
    server.proc.wait(timeout=10)


def attach_then_stop_as_copilot_does(repo: Path) -> dict[str, object]:
    """What the stop left: the episode's open file and whether the lease is still there."""
    with McpProcess(repo, "--http-port", "0") as server:
        server.url()
        server.send(initialize("GitHub Copilot CLI"), call(2, "majordomus_session_attach", {"external_id": "cop-1"}))
        server.answer(2)
        stop_as_copilot_does(server)
    state = open_file(repo, "cop-1") or {}
    return {"held_by": state.get("held_by"), "detached": str(state.get("detached_at")).startswith("20"),
            "lease_left": (repo / LEASE).exists()}


@racing(COPILOT_SIGKILL)
def test_an_episode_is_detached_and_the_lease_gone_within_copilots_3_ms(tmp_path: Path, run_majordomus: object) -> None:
    left = [attach_then_stop_as_copilot_does(make_initialised(tmp_path / f"repo{n}", run_majordomus))
            for n in range(TRIALS)]
    assert left == [{"held_by": None, "detached": True, "lease_left": False}] * TRIALS
