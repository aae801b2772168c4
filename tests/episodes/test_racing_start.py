"""Copilot runs SessionStart and UserPromptSubmit at the same moment; with a slow start the prompt
was archived `orphan`. SPEC §5.4: a prompt whose SessionStart hook was still running when it arrived belongs to
that episode. The start is slowed deterministically: a `git` on PATH that sleeps before `status` (the start reads
the working tree's state), so the prompt hook runs while the start holds its mark."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import time
from pathlib import Path

from majordomus.episodes.starting import WAIT_SECONDS
from majordomus.episodes.store import session_lock
from majordomus.identity import session_key
from majordomus.layout import Layout
from support import MAJORDOMUS, open_files

SLOW_SECONDS = 1.5


def slow_git(tmp_path: Path, seconds: float = SLOW_SECONDS) -> dict[str, str]:
    """An environment whose `git status` takes SLOW_SECONDS longer; every other git command is the real one."""
    real = subprocess.run(["sh", "-c", "command -v git"], capture_output=True, text=True, check=True).stdout.strip()
    bin_dir = tmp_path / "slow-bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "git"
    wrapper.write_text(f"#!/bin/sh\nfor a in \"$@\"; do [ \"$a\" = status ] && sleep {seconds} && break; done\n"
                       f"exec {real} \"$@\"\n")
    wrapper.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


def start(repo: Path, env: dict[str, str], session: str) -> subprocess.Popen[bytes]:
    process = subprocess.Popen([str(MAJORDOMUS), "capture", "session", "--provider", "copilot", "--event", "start"],
                               cwd=repo, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdin is not None
    process.stdin.write(json.dumps({"session_id": session, "source": "new", "initial_prompt": "tidy it"}).encode())
    process.stdin.close()
    process.stdin = None  # closed already: communicate() must not flush it
    return process


def prompt(repo: Path, session: str, text: str = "tidy it") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([str(MAJORDOMUS), "capture", "prompt", "--provider", "copilot"], cwd=repo,
                          input=json.dumps({"session_id": session, "prompt": text}).encode(), capture_output=True,
                          timeout=60, check=False)


def records(repo: Path) -> list[dict[str, object]]:
    return [json.loads(p.read_text()) for p in sorted((repo / ".ai/local/prompts").glob("*.json"))]


def test_a_prompt_that_arrives_while_its_start_is_running_is_linked_open_to_the_episode_that_start_opens(
        initialised_repo: Path, tmp_path: Path) -> None:
    starter = start(initialised_repo, slow_git(tmp_path), "cop-1")
    marks = initialised_repo / ".ai/local/state/starting"
    deadline = time.monotonic() + 10
    while not (marks.is_dir() and any(marks.iterdir())) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert open_files(initialised_repo) == {}, "the start finished before the prompt could race it"
    done = prompt(initialised_repo, "cop-1")
    _, err = starter.communicate(timeout=30)
    assert starter.returncode == 0 and b"opened at" in err, err
    assert done.returncode == 0, done.stderr
    assert b"its start was still running when the prompt arrived" in done.stderr
    ((opened),) = open_files(initialised_repo).values()
    (record,) = records(initialised_repo)
    assert record["episode_link"] == "open" and record["episode"] == opened["session_id"]
    assert not any(marks.iterdir()), "the start left its mark behind"


def test_a_mark_left_by_a_killed_start_makes_no_prompt_wait(initialised_repo: Path, tmp_path: Path) -> None:
    starter = start(initialised_repo, slow_git(tmp_path), "cop-2")
    marks = initialised_repo / ".ai/local/state/starting"
    deadline = time.monotonic() + 10
    while not (marks.is_dir() and any(marks.iterdir())) and time.monotonic() < deadline:
        time.sleep(0.01)
    starter.kill()  # kill -9 mid-start: the mark stays, naming a process that is gone
    starter.communicate(timeout=30)
    assert any(marks.iterdir())
    began = time.monotonic()
    done = prompt(initialised_repo, "cop-2")
    assert done.returncode == 0 and b"orphan: no episode open" in done.stderr, done.stderr
    assert time.monotonic() - began < 5  # not the 8 s wait (generous: a loaded machine)
    (record,) = records(initialised_repo)
    assert record["episode_link"] == "orphan"


def test_a_prompt_of_another_session_does_not_wait_for_a_running_start(initialised_repo: Path) -> None:
    """The start is held inside its session's lock (as a concurrent close of that session would hold it) with its
    mark left: it runs for as long as the test says, so a prompt that waited for it would take the whole wait."""
    layout = Layout(initialised_repo)
    lock = session_lock(layout, session_key("cop-3"))  # one of the 256 stripes
    assert lock != session_lock(layout, session_key("someone-else")), "pick ids of two stripes"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a+b") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        starter = start(initialised_repo, dict(os.environ), "cop-3")
        marks = initialised_repo / ".ai/local/state/starting"
        deadline = time.monotonic() + 30
        while not (marks.is_dir() and any(marks.iterdir())) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert marks.is_dir() and any(marks.iterdir()), "the start left no mark to be mistaken for"
        began = time.monotonic()
        done = prompt(initialised_repo, "someone-else")
        took = time.monotonic() - began
        running = starter.poll() is None
    starter.communicate(timeout=60)  # the lock let go: the start opens its episode
    assert done.returncode == 0 and b"orphan: no episode open" in done.stderr
    assert running, "the start ended before the prompt did: the test proved nothing"
    assert took < WAIT_SECONDS - 1, f"the prompt waited {took:.1f} s for a start that is not its session's"
    assert starter.returncode == 0


def test_a_start_that_begins_just_after_the_prompt_hook_still_gets_the_prompt(initialised_repo: Path,
                                                                            tmp_path: Path) -> None:
    """Copilot starts both hooks at the same moment: the prompt hook may look before the start has left its mark."""
    env = slow_git(tmp_path)
    prompter = subprocess.Popen([str(MAJORDOMUS), "capture", "prompt", "--provider", "copilot"], cwd=initialised_repo,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert prompter.stdin is not None
    prompter.stdin.write(json.dumps({"session_id": "cop-4", "prompt": "tidy it"}).encode())
    prompter.stdin.close()
    prompter.stdin = None
    time.sleep(0.1)
    starter = start(initialised_repo, env, "cop-4")
    _, said = prompter.communicate(timeout=60)
    starter.communicate(timeout=60)
    assert prompter.returncode == 0 and b"its start was still running" in said, said
    (record,) = records(initialised_repo)
    ((opened),) = open_files(initialised_repo).values()
    assert record["episode_link"] == "open" and record["episode"] == opened["session_id"]
