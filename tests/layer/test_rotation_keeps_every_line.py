"""`history --rotate` while hooks append loses no ledger line.

Rotation rewrote the ledger under a lock the hooks' appends never took: 6 of 150 lines appended meanwhile
vanished.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import MAJORDOMUS
from mcp_support import set_policy

STARTS = 150


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
    """1. the policy keeps 3 ledger lines; 2. 150 hook starts in 4 parallel workers while `history --rotate`
    runs again and again. Result: every one of the 150 `session.started` lines is in the ledger or an archive."""
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


@pytest.mark.slow
def test_rotations_killed_at_random_while_hooks_append_lose_no_line(initialised_repo: Path) -> None:
    """1. the policy keeps 3 ledger lines; 2. 150 hook starts in 4 parallel workers while `history --rotate` is
    started again and again and SIGKILLed after a random 0-150 ms. Result: every one of the 150 `session.started`
    lines is in the ledger or an archive (a rotation killed between its archive and its rewrite may leave a line
    in both: never in neither); every line of every file parses; no temp file is left once a rotation completes."""
    set_policy(initialised_repo, ledger__retention_max_lines=3)
    rng = random.Random(94)
    kills = 0
    with ThreadPoolExecutor(max_workers=4) as pool:
        starts = [pool.submit(start, initialised_repo, i) for i in range(STARTS)]
        while not all(f.done() for f in starts):
            rotation = subprocess.Popen([str(MAJORDOMUS), "history", "--rotate"], cwd=initialised_repo,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(rng.uniform(0, 0.15))  # most land before, during or after the rewrite
            if rotation.poll() is None:
                rotation.send_signal(signal.SIGKILL)
                kills += 1
            rotation.wait()
    assert [f.result() for f in starts] == [0] * STARTS
    assert kills >= 3
    found = started_sessions(initialised_repo)
    assert sorted(set(found)) == sorted(f"ps-{i}" for i in range(STARTS))
    time.sleep(1.1)  # a new second: the last rotation's archive name is free
    done = subprocess.run([str(MAJORDOMUS), "history", "--rotate"], cwd=initialised_repo, capture_output=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert list((initialised_repo / ".ai/local/state").glob(".*.tmp")) == []


def test_a_rotation_removes_the_temp_a_killed_rotation_left(initialised_repo: Path) -> None:
    """A temp of the ledger's rewrite whose writer is gone (the state a kill mid-write leaves) is removed by the
    next rotation; one of a live writer is not."""
    state = initialised_repo / ".ai/local/state"
    gone = subprocess.Popen(["true"])
    gone.wait()
    dead = state / f".ledger.jsonl.{gone.pid}-11-00aa00aa.tmp"
    live = state / f".ledger.jsonl.{os.getpid()}-12-00bb00bb.tmp"
    for path in (dead, live):
        path.write_text('{"half": ')
    set_policy(initialised_repo, ledger__retention_max_lines=1)
    for i in range(3):
        assert start(initialised_repo, i) == 0
    done = subprocess.run([str(MAJORDOMUS), "history", "--rotate"], cwd=initialised_repo, capture_output=True,
                          timeout=60)
    assert done.returncode == 0 and b"moved to" in done.stdout, done
    assert not dead.exists() and live.exists()
