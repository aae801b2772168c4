"""Many HTTP peers attaching at once to one shared server open whole episodes.

Threads of one server used to race on one temp file name (the pid only) for `session-current.yaml`: a
quarter of the episodes came out half-open — an open file without its working context or ledger line —
while the attach answered with a failure sentence that a bench counted as success.
"""

from __future__ import annotations

import json
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from mcp_support import McpProcess, attach_one, auth, initialize, open_file

PEERS = 40


@pytest.mark.slow
def test_forty_peers_attaching_at_once_open_forty_whole_episodes(initialised_repo: Path) -> None:
    """1. a shared server; 2. 40 HTTP sessions initialize and attach, all at once, each its own external_id.
    Result: 40 answers saying `opened at`; 40 open files held by the server; 40 working contexts; 40 ledger lines."""
    with McpProcess(initialised_repo, "--http-port", "0") as proc:
        url = proc.url()
        proc.request(initialize("owner"))
        with ThreadPoolExecutor(max_workers=PEERS) as pool:
            owner = auth(initialised_repo)
            lines = list(pool.map(lambda i: attach_one(url, owner, i), range(PEERS)))
        opened = [open_file(initialised_repo, f"thread-{i}") for i in range(PEERS)]
        proc.kill()  # the HTTP peers are still attached: the server would outlive its own client
    assert [line for line in lines if " opened at " not in line] == []
    assert all(o is not None and o["held_by"] for o in opened)
    sids = {o["session_id"] for o in opened if o is not None}
    contexts = {p.name.split("--")[1][:-3] for p in (initialised_repo / ".ai/local/session-contexts").glob("*.md")}
    assert sids <= contexts
    ledger = (initialised_repo / ".ai/local/state/ledger.jsonl").read_text().splitlines()
    started = {json.loads(line)["session"] for line in ledger if json.loads(line)["event"] == "session.started"}
    assert sids <= started
    assert not (initialised_repo / ".ai/local/session-contexts/.session-context.log").exists()


@pytest.mark.slow
def test_forty_attaches_at_once_share_the_servers_git_status(initialised_repo: Path, tmp_path: Path) -> None:
    """1. a shared server whose PATH has a `git` that logs its calls; 2. 40 HTTP peers attach at once.
    Result: 40 whole episodes, and far fewer than 40 `git status` runs (one per second of attaches: each spawn
    from a busy server stalled every other attach), while a hook start still runs its own."""
    bindir, log = tmp_path / "bin", tmp_path / "git-calls.log"
    bindir.mkdir()
    real = shutil.which("git")
    (bindir / "git").write_text(f'#!/bin/sh\necho "$*" >> {log}\nexec {real} "$@"\n')
    (bindir / "git").chmod(0o755)
    env = {"PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"}
    with McpProcess(initialised_repo, "--http-port", "0", env=env) as proc:
        url = proc.url()
        proc.request(initialize("owner"))
        with ThreadPoolExecutor(max_workers=PEERS) as pool:
            owner = auth(initialised_repo)
            lines = list(pool.map(lambda i: attach_one(url, owner, i), range(PEERS)))
        proc.kill()
    assert [line for line in lines if " opened at " not in line] == []
    statuses = [line for line in log.read_text().splitlines() if " status " in f" {line} "]
    assert 1 <= len(statuses) <= PEERS // 4, statuses
