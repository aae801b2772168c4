"""A close whose `git status` outlives its bound leaves no `.git/index.lock`, and says so.

`git status` takes the index lock while it walks the tree; SIGKILLed at the deadline it left the lock, and
the person's next `git commit` failed. The record said `changed_files: []` with no mark.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import MAJORDOMUS, git
from mcp_support import front_matter

UNTRACKED = 60_000


def hook(repo: Path, event: str, payload: dict[str, str], env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([str(MAJORDOMUS), "capture", "session", "--provider", "claude-code", "--event", event],
                          cwd=repo, input=json.dumps(payload).encode(), capture_output=True, timeout=60,
                          env={**os.environ, **env})


@pytest.mark.slow
def test_a_close_whose_status_is_cut_leaves_no_lock_and_marks_the_list(initialised_repo: Path) -> None:
    """1. 60,000 untracked files (git status takes ~0.15 s); 2. the close's git bound narrowed to 0.02 s;
    3. start, then end. Result: no `.git/index.lock`; the record marks `changed_files` as truncated, the working
    tree unknown; `git commit` still works."""
    for i in range(UNTRACKED):
        (initialised_repo / f"u{i}").touch()
    env = {"MAJORDOMUS_GIT_LIST_SECONDS": "0.02"}
    assert hook(initialised_repo, "start", {"session_id": "big", "source": "startup"}, env).returncode == 0
    done = hook(initialised_repo, "end", {"session_id": "big", "reason": "other"}, env)
    assert done.returncode == 0 and b"episode closed" in done.stderr, done.stderr
    assert not (initialised_repo / ".git/index.lock").exists()
    (record,) = [p for p in (initialised_repo / ".ai/repo/sessions").glob("*.md") if p.name != "README.md"]
    meta = front_matter(record)
    assert "changed_files" in meta["truncated"] and meta["working_tree"] == "unknown"
    (initialised_repo / "u0").write_text("tracked now\n")
    git(initialised_repo, "add", "u0")
    git(initialised_repo, "commit", "-q", "-m", "the person's next commit")
