"""A start's and an end's `git status` is started before the hook imports the boundary, and is either the answer the
boundary uses or stopped before the hook returns: never run twice, never left running.

A `git` on PATH logs each call with its pid; while a marker exists it sleeps 5 s before `status` (a SIGTERM ends it
and its sleep). An early git nobody asks for (the episode is open already, there is nothing to close) must be gone
when the hook has returned.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import MAJORDOMUS, git
from support import MAJORDOMUS_HOOK, git_calls, wrapped_git


def logging_git(where: Path) -> tuple[str, Path, Path]:
    bindir, log, marker = wrapped_git(where, slow=("status",))
    return f"{bindir}{os.pathsep}{os.environ['PATH']}", log, marker


def hook(repo: Path, path: str, event: str, payload: dict[str, str], lean: bool) -> None:
    """The command a wired client runs: the launcher under `python -IS`, or the console entry."""
    argv = [sys.executable, "-IS", str(MAJORDOMUS_HOOK)] if lean else [str(MAJORDOMUS)]
    done = subprocess.run([*argv, "capture", "session", "--provider", "claude-code", "--event", event], cwd=repo,
                          input=json.dumps(payload).encode(), capture_output=True, timeout=60,
                          env={**os.environ, "PATH": path})
    assert done.returncode == 0, done.stderr.decode()


def statuses(log: Path) -> list[tuple[int, str]]:
    return [(pid, words) for pid, _, words in git_calls(log) if " status " in f" {words} "]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize("lean", [True, False], ids=["launcher", "console"])
def test_a_new_episode_runs_one_git_status_and_records_its_answer(initialised_repo: Path, tmp_path: Path,
                                                                  lean: bool) -> None:
    path, log, _ = logging_git(tmp_path)
    (initialised_repo / "README.md").write_text("changed before the start\n")
    git(initialised_repo, "add", "README.md")
    hook(initialised_repo, path, "start", {"session_id": "early", "source": "startup"}, lean)
    assert len(statuses(log)) == 1  # the early one was the answer: not run again
    opened = (initialised_repo / ".ai/local/state/sessions-open/early.yaml").read_text()
    assert 'start_working_tree: "dirty"' in opened
    hook(initialised_repo, path, "end", {"session_id": "early", "reason": "logout"}, lean)
    assert len(statuses(log)) == 2  # the close's listing, once
    [record] = (initialised_repo / ".ai/repo/sessions").glob("2*.md")
    assert '"M  README.md"' in record.read_text()


@pytest.mark.parametrize("lean", [True, False], ids=["launcher", "console"])
def test_an_early_git_nobody_asks_for_is_gone_when_the_hook_returns(initialised_repo: Path, tmp_path: Path,
                                                                   lean: bool) -> None:
    path, log, marker = logging_git(tmp_path)
    hook(initialised_repo, path, "start", {"session_id": "kept", "source": "startup"}, lean)
    marker.touch()  # from now on a status sleeps 5 s unless stopped
    hook(initialised_repo, path, "start", {"session_id": "kept", "source": "resume"}, lean)  # open already: kept
    hook(initialised_repo, path, "end", {"session_id": "never-opened", "reason": "logout"}, lean)  # nothing to close
    early = statuses(log)[1:]
    assert len(early) == 2  # each hook started its git before it knew it would not need it
    assert [pid for pid, _ in early if alive(pid)] == []  # stopped and reaped, not left to run on
    assert not (initialised_repo / ".git/index.lock").exists()
    assert not (initialised_repo / ".ai/local/hook-failures.log").exists()
