"""A client may SIGKILL its MCP server 3 ms after SIGTERM (Copilot CLI does). On SIGTERM the server
makes the detach (`detached_at`, no `held_by`) and the lease's removal durable before anything that can wait.

The test sends SIGTERM, watches the files, and SIGKILLs the server the moment both are on disk: whatever the
server would have done after that is never done, as with Copilot. How fast that moment comes is measured by
bench/sigterm.py, which SIGKILLs at 3 ms; tests assert behaviour, not wall-clock limits."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from mcp_support import INITIALIZED, LEASE, McpProcess, call, initialize, open_file, structured


def test_sigterm_makes_the_detach_and_the_lease_durable_first(initialised_repo: Path, run_majordomus) -> None:
    lease = initialised_repo / LEASE
    with McpProcess(initialised_repo, "--http-port", "0") as server:
        server.send(initialize(), INITIALIZED, call(2, "majordomus_session_attach", {"external_id": "cop-1"}))
        server.answer(1)
        assert structured(server.answer(2))["episode"]["state"] == "open"
        held = open_file(initialised_repo, "cop-1")
        assert held is not None and held["held_by"] == server.proc.pid and held.get("detached_at") is None
        assert lease.exists()
        os.kill(server.proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            found = open_file(initialised_repo, "cop-1")
            if found is not None and found.get("detached_at") and not lease.exists():
                break
            time.sleep(0.0005)
        os.kill(server.proc.pid, signal.SIGKILL)  # the client's kill: nothing after this point is done
        server.proc.wait(timeout=10)
    found = open_file(initialised_repo, "cop-1")
    assert found is not None and found.get("detached_at") and found.get("held_by") is None, found
    assert not lease.exists()
    # and doctor, after this ordinary Copilot exit, has nothing to warn about
    done = run_majordomus("doctor", cwd=initialised_repo)
    assert b"WARN" not in done.stdout and done.returncode == 0, done.stdout.decode()
