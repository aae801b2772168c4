"""The soak's short version: every sitting keeps a true record while lease holders are killed. bench/soak.py runs
hook clients and MCP clients in one repository while the lease holder is killed at random, then checks every
sitting against its history (one episode, the implied outcome, nothing half-open, the ledger parses, no lock held,
no temp file) and exits 1 on any wrong answer."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SOAK = Path(__file__).resolve().parents[2] / "bench" / "soak.py"


@pytest.mark.slow
def test_a_short_soak_with_killed_lease_holders_leaves_a_true_record() -> None:
    done = subprocess.run([sys.executable, str(SOAK), "--seconds", "12", "--hook-clients", "2", "--mcp-clients", "3",
                           "--kill-every", "2", "--seed", "20261203"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "errors 0" in done.stdout
    killed = int(done.stdout.split(" lease holders killed")[0].rsplit(" ", 1)[1])
    assert killed >= 1, done.stdout  # the soak did kill a holder: otherwise it proved nothing about failover
