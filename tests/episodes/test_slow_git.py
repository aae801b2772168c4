"""A close whose git is slower than its bound leaves no lock, and its record says what it lacks.

A `git` on PATH that sleeps before `status` and `rev-list` stands for a repository with 650k untracked files: the
close must stop it without leaving `.git/index.lock`, every git it runs must be in git's no-lock mode (the flag and
GIT_OPTIONAL_LOCKS=0, which reaches the gits git itself starts), and the record marks both lists as not obtained
instead of saying `changed_files: []` and `commits: [diverged]`. (The 0.8 s bound of all git work of one close is a
figure: bench/slow_git.py measures it.)
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from conftest import MAJORDOMUS, git
from mcp_support import front_matter
from support import git_calls, wrapped_git


def slow_git(where: Path) -> tuple[Path, Path, Path]:
    """A directory holding a `git` that logs every call and, while `marker` exists, sleeps before a listing."""
    return wrapped_git(where, slow=("status", "rev-list"))


def hook(repo: Path, event: str, payload: dict[str, str], path: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([str(MAJORDOMUS), "capture", "session", "--provider", "claude-code", "--event", event],
                          cwd=repo, input=json.dumps(payload).encode(), capture_output=True, timeout=60,
                          env={**os.environ, "PATH": path})


def test_a_close_whose_git_is_too_slow_leaves_no_lock_and_marks_both_lists(initialised_repo: Path,
                                                                           tmp_path: Path) -> None:
    """1. a `git` on PATH; 2. start; a commit and a change in the sitting; 3. the wrapper now sleeps 5 s before
    `status` and `rev-list`; 4. end. Result: the close is recorded; no `.git/index.lock`; the record's
    `truncated` names `changed_files` and `commits`, the working tree is `unknown` and `commits` is not
    `diverged`; every git the close ran had `--no-optional-locks` and GIT_OPTIONAL_LOCKS=0; `git commit` works."""
    bindir, log, marker = slow_git(tmp_path)
    path = f"{bindir}{os.pathsep}{os.environ['PATH']}"
    assert hook(initialised_repo, "start", {"session_id": "slow", "source": "startup"}, path).returncode == 0
    (initialised_repo / "work.txt").write_text("the agent's work\n")
    git(initialised_repo, "add", "work.txt")
    git(initialised_repo, "commit", "-q", "-m", "work in the sitting")
    (initialised_repo / "README.md").write_text("changed, not committed\n")
    marker.touch()
    log.write_text("")
    done = hook(initialised_repo, "end", {"session_id": "slow", "reason": "other"}, path)
    assert done.returncode == 0 and b"episode closed" in done.stderr, done.stderr
    assert not (initialised_repo / ".git/index.lock").exists()
    (record,) = [p for p in (initialised_repo / ".ai/repo/sessions").glob("*.md") if p.name != "README.md"]
    meta = front_matter(record)
    assert sorted(meta["truncated"]) == ["changed_files", "commits"], meta
    assert meta["working_tree"] == "unknown" and meta["commits"] != ["diverged"], meta
    calls = git_calls(log)
    assert {"status", "rev-list"} <= {word for _, _, words in calls for word in words.split()}, calls
    assert all(locks == "0" and words.startswith("--no-optional-locks ") for _, locks, words in calls), calls
    marker.unlink()
    git(initialised_repo, "commit", "-q", "-am", "the person's next commit")


def test_a_close_with_a_quick_git_marks_nothing(initialised_repo: Path, tmp_path: Path) -> None:
    """The same sitting with the wrapper not sleeping: both lists complete, no `truncated`, the tree dirty."""
    bindir, _, _ = slow_git(tmp_path)
    path = f"{bindir}{os.pathsep}{os.environ['PATH']}"
    assert hook(initialised_repo, "start", {"session_id": "quick", "source": "startup"}, path).returncode == 0
    (initialised_repo / "work.txt").write_text("the agent's work\n")
    git(initialised_repo, "add", "work.txt")
    git(initialised_repo, "commit", "-q", "-m", "work in the sitting")
    (initialised_repo / "README.md").write_text("changed, not committed\n")
    assert hook(initialised_repo, "end", {"session_id": "quick", "reason": "other"}, path).returncode == 0
    (record,) = [p for p in (initialised_repo / ".ai/repo/sessions").glob("*.md") if p.name != "README.md"]
    meta = front_matter(record)
    assert "truncated" not in meta and meta["working_tree"] == "dirty" and len(meta["commits"]) == 1, meta
    assert meta["changed_files"] == [" M README.md"], meta
