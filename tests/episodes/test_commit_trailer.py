"""`capture install --git` and the Majordomus-Episode trailer: a commit made while exactly one episode runs names
it, and `show` reads the trailer back; a person's own hook still runs, and our part never blocks a commit. With
real `git commit` in tmp repos."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from conftest import RunMajordomus, git
from history.test_episodes_show_search import World

HOOK = Path(".git/hooks/prepare-commit-msg")


@pytest.fixture(name="world")
def _world(initialised_repo: Path, run_majordomus: RunMajordomus) -> World:
    return World(initialised_repo, run_majordomus)


def _commit(repo: Path, subject: str, budget: str | None = "20") -> subprocess.CompletedProcess[str]:
    """A real `git commit`. The hook's 100 ms budget is raised (its own knob) so that a loaded machine cannot
    turn a trailer these tests expect into a fail-open; `budget=None` keeps the real 100 ms."""
    (repo / "f.txt").write_text(subject + "\n")
    git(repo, "add", "f.txt")
    env = {k: v for k, v in os.environ.items() if k != "MAJORDOMUS_TRAILER_BUDGET_SECONDS"}
    if budget is not None:
        env["MAJORDOMUS_TRAILER_BUDGET_SECONDS"] = budget
    return subprocess.run(["git", "commit", "-q", "-m", subject], cwd=repo, capture_output=True, text=True,
                          check=False, env=env)


def _trailers(repo: Path) -> str:
    return git(repo, "log", "-1", "--format=%(trailers:key=Majordomus-Episode,valueonly)").strip()


def test_one_running_episode_names_the_commit_and_show_uses_the_trailer(world: World) -> None:
    assert b"added" in world.ok("capture", "install", "--git").stdout
    assert os.access(world.repo / HOOK, os.X_OK)
    ep = world.start("c1")
    assert _commit(world.repo, "before any prompt").returncode == 0
    assert _trailers(world.repo) == ""  # open, but no turn running
    world.prompt("c1", "make the change")
    assert _commit(world.repo, "during the turn").returncode == 0
    assert _trailers(world.repo) == ep
    shown = world.text("show", "HEAD")
    assert f"is named by its Majordomus-Episode trailer: {ep}" in shown
    data = world.json("show", "HEAD")
    assert [c["episode"]["id"] for c in data["candidates"]] == [ep]
    # an amend keeps the one trailer it carries, never a second
    subprocess.run(["git", "commit", "-q", "--amend", "--no-edit"], cwd=world.repo, check=True)
    assert _trailers(world.repo) == ep
    world.ok("capture", "session", "--provider", "claude-code", "--event", "turn",
             input=json.dumps({"session_id": "c1"}).encode())
    assert _commit(world.repo, "after the turn ended").returncode == 0
    assert _trailers(world.repo) == ""  # idle turn: none
    world.end("c1", "other")
    assert _commit(world.repo, "no episode open").returncode == 0
    assert _trailers(world.repo) == ""
    assert b"already wired" in world.ok("capture", "install", "--git").stdout


def test_two_open_episodes_name_none(world: World) -> None:
    world.ok("capture", "install", "--git")
    world.start("a1")
    world.prompt("a1", "first agent works")
    world.start("b1", "codex")
    world.prompt("b1", "second agent works", "codex")
    assert _commit(world.repo, "while two are open").returncode == 0
    assert _trailers(world.repo) == ""


def test_a_persons_hook_is_chained_and_still_runs_and_still_blocks(world: World) -> None:
    theirs = world.repo / HOOK
    theirs.parent.mkdir(parents=True, exist_ok=True)
    theirs.write_text('#!/bin/sh\necho "their hook ran: $2" >> "$(git rev-parse --git-dir)/theirs.log"\n'
                      'grep -q BLOCK "$1" && exit 1\nexit 0\n')
    theirs.chmod(0o755)
    out = world.ok("capture", "install", "--git").stdout.decode()
    assert "kept your prepare-commit-msg hook as prepare-commit-msg.majordomus-chained" in out
    ep = world.start("c1")
    world.prompt("c1", "work")
    assert _commit(world.repo, "ordinary").returncode == 0
    assert "their hook ran: message" in (world.repo / ".git/theirs.log").read_text()
    assert _trailers(world.repo) == ep
    assert _commit(world.repo, "BLOCK me").returncode != 0  # their hook's verdict stands
    world.ok("capture", "install", "--git")  # a second install chains nothing twice
    assert (world.repo / ".git/hooks/prepare-commit-msg.majordomus-chained").read_text().startswith("#!/bin/sh\necho")


def test_core_hooks_path_inside_the_repository_is_honoured(world: World) -> None:
    git(world.repo, "config", "core.hooksPath", ".githooks")
    world.ok("capture", "install", "--git")
    assert (world.repo / ".githooks/prepare-commit-msg").is_file() and not (world.repo / HOOK).exists()
    ep = world.start("c1")
    world.prompt("c1", "work")
    assert _commit(world.repo, "through hooksPath").returncode == 0
    assert _trailers(world.repo) == ep


def test_core_hooks_path_outside_is_refused_with_a_sentence(world: World, tmp_path: Path) -> None:
    git(world.repo, "config", "core.hooksPath", str(tmp_path / "elsewhere"))
    done = world.run("capture", "install", "--git", cwd=world.repo)
    assert done.returncode == 15 and b"outside this repository" in done.stderr
    assert not (tmp_path / "elsewhere").exists()


def _break_our_part(repo: Path, tmp_path: Path, body: str) -> None:
    script = tmp_path / "our_part.py"
    script.write_text(body)
    hook = repo / HOOK
    text = hook.read_text()
    real = text.split(" -I -S '", 1)[1].split("'", 1)[0]
    hook.write_text(text.replace(real, str(script)))


def test_our_part_crashing_never_blocks_a_commit(world: World, tmp_path: Path) -> None:
    world.ok("capture", "install", "--git")
    world.start("c1")
    world.prompt("c1", "work")
    _break_our_part(world.repo, tmp_path, "raise SystemExit(3)\n")
    done = _commit(world.repo, "despite a crash")
    assert done.returncode == 0, done.stderr
    assert git(world.repo, "log", "-1", "--format=%s") == "despite a crash"


def test_our_part_hanging_is_cut_at_100_ms_and_the_commit_succeeds(world: World, tmp_path: Path) -> None:
    world.ok("capture", "install", "--git")
    world.start("c1")
    world.prompt("c1", "work")
    _break_our_part(world.repo, tmp_path, "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                                          "time.sleep(30)\n")
    began = time.monotonic()
    done = _commit(world.repo, "despite a hang", budget=None)
    spent = time.monotonic() - began
    assert done.returncode == 0, done.stderr
    assert git(world.repo, "log", "-1", "--format=%s") == "despite a hang"
    assert spent < 20  # killed by the hook's timeout, not waited for (a bound far above 100 ms: no timing flake)
