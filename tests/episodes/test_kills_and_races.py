"""Kills between a record and its ledger line, racing inits, temp files of killed
writes in the tracked folder, and an open file edited to point outside the repository."""

from __future__ import annotations

import json
import os
import random
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from conftest import MAJORDOMUS, git, make_repo
from support import hook, kill_end_after

OPEN = ".ai/local/state/sessions-open"


def closed_lines(repo: Path, sid: str) -> int:
    ledger = (repo / ".ai/local/state/ledger.jsonl").read_text().splitlines()
    events = [json.loads(line) for line in ledger]
    return sum(1 for e in events if e["event"] == "session.closed" and e["session"] == sid)


def records(repo: Path, sid: str) -> list[Path]:
    return [p for p in (repo / ".ai/repo/sessions").glob(f"*--{sid}--*.md")]


@pytest.mark.slow
def test_ends_killed_at_random_moments_leave_one_record_and_one_ledger_line(initialised_repo: Path) -> None:
    """1. 25 trials: start an episode, SIGKILL its `end` after a random 0–80 ms, then run `end` again.
    Result: every episode has exactly one record, exactly one `session.closed` ledger line, and no open file."""
    rng = random.Random(9)
    for trial in range(25):
        ps = f"kill-{trial}"
        assert hook(initialised_repo, "start", {"session_id": ps, "source": "startup"}).returncode == 0
        sid = yaml.safe_load((initialised_repo / OPEN / f"{ps}.yaml").read_text())["session_id"]
        kill_end_after(initialised_repo, ps, rng.uniform(0, 0.08))
        again = hook(initialised_repo, "end", {"session_id": ps, "reason": "other"})
        assert again.returncode == 0
        assert len(records(initialised_repo, sid)) == 1, (trial, again.stderr)
        assert closed_lines(initialised_repo, sid) == 1, (trial, again.stderr)
        assert not (initialised_repo / OPEN / f"{ps}.yaml").exists()


def test_a_record_without_its_ledger_line_gets_it_from_the_next_end(initialised_repo: Path) -> None:
    """The exact state a kill between the record and the ledger line leaves: record written, open file still
    there, no `session.closed` line, no close in the working context. The next end finishes the close."""
    hook(initialised_repo, "start", {"session_id": "half", "source": "startup"})
    open_file = initialised_repo / OPEN / "half.yaml"
    saved = open_file.read_bytes()
    ledger = initialised_repo / ".ai/local/state/ledger.jsonl"
    before = ledger.read_bytes()
    assert hook(initialised_repo, "end", {"session_id": "half", "reason": "other"}).returncode == 0
    (context,) = (initialised_repo / ".ai/local/session-contexts").glob("*.md")
    opened_text = context.read_text().split("\n## Close\n")[0] + "\n"
    open_file.write_bytes(saved)
    ledger.write_bytes(before)
    context.write_text(opened_text)
    sid = json.loads(before.splitlines()[-1])["session"]
    done = hook(initialised_repo, "end", {"session_id": "half", "reason": "other"})
    assert b"this close adds none" in done.stderr
    assert closed_lines(initialised_repo, sid) == 1 and "\n## Close\n" in context.read_text()
    assert not open_file.exists() and len(records(initialised_repo, sid)) == 1


def test_of_inits_racing_in_one_repository_exactly_one_initialises(tmp_path: Path) -> None:
    """In each of 6 fresh repositories, 8 `init`s spawned at once: one says initialised, seven are refused (15)."""
    for n in range(6):
        repo = make_repo(tmp_path / f"fresh-{n}")
        procs = [subprocess.Popen([str(MAJORDOMUS), "init"], cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                 for _ in range(8)]
        outs = [(p.communicate(timeout=60)[0], p.returncode) for p in procs]
        said = [out for out, _ in outs if b"majordomus layer initialised" in out]
        assert len(said) == 1 and sorted(code for _, code in outs) == [0] + [15] * 7, (n, outs)
        assert (repo / ".ai/repo/policy.yaml").is_file()


def test_a_temp_file_of_a_killed_write_is_never_shared_and_update_removes_it(initialised_repo: Path,
                                                                             run_majordomus) -> None:
    stale = initialised_repo / ".ai/repo/sessions" / ".20261202T080000Z--s-x.md.123.abcd.tmp"
    stale.write_text("half a record")
    assert git(initialised_repo, "status", "--porcelain", "--untracked-files=all") == ""  # ignored: never added
    old = time.time() - 3600
    os.utime(stale, (old, old))
    done = run_majordomus("update", cwd=initialised_repo)
    assert done.returncode == 0 and b"stale temp file" in done.stdout and not stale.exists()


def test_an_open_file_edited_to_point_outside_closes_inside_the_repository(initialised_repo: Path) -> None:
    hook(initialised_repo, "start", {"session_id": "crafted", "source": "startup"})
    open_file = initialised_repo / OPEN / "crafted.yaml"
    text = open_file.read_text()
    started = next(line for line in text.splitlines() if line.startswith("started_at:"))
    open_file.write_text(text.replace(started, 'started_at: "/../../../../../../tmp/majordomus-escape"'))
    before = set(initialised_repo.parent.iterdir())
    done = hook(initialised_repo, "end", {"session_id": "crafted", "reason": "other"})
    assert done.returncode == 0 and b"episode closed" in done.stderr
    assert not list(Path("/tmp").glob("majordomus*escape*")) and set(initialised_repo.parent.iterdir()) <= before


@pytest.mark.parametrize("blocked", ["ledger.jsonl", "session-current.yaml"])
def test_a_start_whose_ledger_line_or_pointer_fails_says_it_opened(initialised_repo: Path, blocked: str) -> None:
    """1. the ledger (or the pointer) cannot be written: a directory stands at its name; 2. start. Result: the
    start says `opened` and that its ledger line was not written, never "could not open"; the open file and the
    working context exist; once the path is free again, the end closes the episode."""
    state = initialised_repo / ".ai/local/state"
    target = state / blocked
    saved = target.read_bytes() if target.is_file() else None
    target.unlink(missing_ok=True)
    target.mkdir()
    done = hook(initialised_repo, "start", {"session_id": "did-open", "source": "startup"})
    assert done.returncode == 0
    assert b"could not open" not in done.stderr and b" opened at " in done.stderr, done.stderr
    assert b"ledger line was not written" in done.stderr, done.stderr
    opened = yaml.safe_load((initialised_repo / OPEN / "did-open.yaml").read_text())
    assert list((initialised_repo / ".ai/local/session-contexts").glob(f"*--{opened['session_id']}.md"))
    target.rmdir()
    if saved is not None:
        target.write_bytes(saved)
    closed = hook(initialised_repo, "end", {"session_id": "did-open", "reason": "other"})
    assert b"episode closed" in closed.stderr, closed.stderr
