"""Issue 9, item 4: `history --rotate` while hooks append loses no ledger line.

Rotation rewrote the ledger under a lock the hooks' appends never took: 6 of 150 lines appended meanwhile
vanished.
"""

from __future__ import annotations

import json
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import MAJORDOMUS
from mcp_support import set_policy

STARTS = 120


def start(repo: Path, i: int) -> int:
    payload = json.dumps({"session_id": f"ps-{i}", "source": "startup"}).encode()
    return subprocess.run([str(MAJORDOMUS), "capture", "session", "--provider", "claude-code", "--event", "start"],
                          cwd=repo, input=payload, capture_output=True, timeout=60).returncode


def started_sessions(repo: Path) -> list[str]:
    state = repo / ".ai/local/state"
    found = []
    for path in [state / "ledger.jsonl", *sorted(state.glob("ledger.*.jsonl.archived"))]:
        for line in path.read_text().splitlines():
            item = json.loads(line)
            if item["event"] == "session.started":
                found.append(item["provider_session"])
    return found


@pytest.mark.slow
def test_rotating_while_hooks_append_loses_no_line(initialised_repo: Path) -> None:
    """1. the policy keeps 3 ledger lines; 2. 120 hook starts in 4 parallel workers while `history --rotate`
    runs again and again. Result: every one of the 120 `session.started` lines is in the ledger or an archive."""
    set_policy(initialised_repo, ledger__retention_max_lines=3)
    with ThreadPoolExecutor(max_workers=5) as pool:
        starts = [pool.submit(start, initialised_repo, i) for i in range(STARTS)]
        rotations = 0
        while not all(f.done() for f in starts):
            subprocess.run([str(MAJORDOMUS), "history", "--rotate"], cwd=initialised_repo, capture_output=True,
                           timeout=60)
            rotations += 1
    assert [f.result() for f in starts] == [0] * STARTS
    assert rotations >= 3
    assert sorted(started_sessions(initialised_repo)) == sorted(f"ps-{i}" for i in range(STARTS))
