"""Temp files are named per writer (pid, thread, random), and the temp of a killed write in
the tracked `.ai/repo/` is removed by the next run that writes there, never committed, never a live writer's."""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
from pathlib import Path

from conftest import git
from majordomus.layout import TEMP_NAME, temp_name, temp_pid
from support import hook, kill_end_after

SESSIONS = ".ai/repo/sessions"


def dead_pid() -> int:
    """The pid of a process that has exited (and was reaped)."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_temp_names_differ_per_thread_and_name_their_writer(tmp_path: Path) -> None:
    """64 threads of one process, 50 names each: no two alike, each `.<name>.<pid>-<thread>-<8 hex>.tmp`."""
    names: list[str] = []
    lock = threading.Lock()

    def pick() -> None:
        mine = [temp_name(tmp_path / "session-current.yaml").name for _ in range(50)]
        with lock:
            names.extend(mine)

    threads = [threading.Thread(target=pick) for _ in range(64)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(names)) == len(names) == 64 * 50
    matches = [re.fullmatch(TEMP_NAME, n) for n in names]
    assert all(m is not None and temp_pid(n) == int(m["pid"]) for m, n in zip(matches, names))
    assert all(m is not None and m["name"] == "session-current.yaml" and int(m["pid"]) == os.getpid()
               for m in matches)
    assert len({re.split(r"[.-]", n)[-3] for n in names}) == 64  # the thread id is in the name


def test_the_next_close_removes_the_temps_of_dead_writers_and_keeps_a_live_ones(initialised_repo: Path) -> None:
    """1. in `.ai/repo/sessions/`: a temp of a writer that is gone (fresh), one of a live writer (fresh), and one
    of a live writer but an hour old; 2. `git status` lists none of them (ignored); 3. start and end an episode.
    Result: the dead writer's and the hour-old temps are gone, the live writer's fresh temp is still there."""
    sessions = initialised_repo / SESSIONS
    dead = sessions / f".20261203T080000Z--s-dead.md.{dead_pid()}-77-0123abcd.tmp"
    live = sessions / f".20261203T080000Z--s-live.md.{os.getpid()}-78-0123abcd.tmp"
    old = sessions / f".20261203T080000Z--s-old.md.{os.getpid()}-79-0123abcd.tmp"
    for path in (dead, live, old):
        path.write_text("half a record")
    hour_ago = time.time() - 3600
    os.utime(old, (hour_ago, hour_ago))
    assert git(initialised_repo, "status", "--porcelain", "--untracked-files=all") == ""
    assert hook(initialised_repo, "start", {"session_id": "sweep", "source": "startup"}).returncode == 0
    done = hook(initialised_repo, "end", {"session_id": "sweep", "reason": "other"})
    assert done.returncode == 0 and b"episode closed" in done.stderr, done.stderr
    assert not dead.exists() and not old.exists() and live.exists()


def test_ends_killed_while_writing_leave_no_temp_after_the_next_close(initialised_repo: Path) -> None:
    """1. 12 trials: start, SIGKILL the `end` at once or after 5-60 ms, end again. Result: after each trial no
    temp file is left in `.ai/repo/` or its sessions, and `git status` shows the records only."""
    for trial in range(12):
        ps = f"tk-{trial}"
        assert hook(initialised_repo, "start", {"session_id": ps, "source": "startup"}).returncode == 0
        kill_end_after(initialised_repo, ps, 0.005 * trial)
        assert hook(initialised_repo, "end", {"session_id": ps, "reason": "other"}).returncode == 0
        left = [p.name for d in (initialised_repo / ".ai/repo", initialised_repo / SESSIONS) for p in d.glob(".*.tmp")]
        assert left == [], (trial, left)


def test_a_close_killed_between_its_records_link_and_its_temps_unlink_leaves_no_temp(initialised_repo: Path) -> None:
    """1. start and end an episode, putting its open file back afterwards and the record's temp beside the
    record under a dead writer's pid: the state a close SIGKILLed after `link()`, before the temp's unlink,
    leaves; 2. end again. Result: that end finds the record ("adds none"), and the temp is gone."""
    open_file = initialised_repo / ".ai/local/state/sessions-open/linked.yaml"
    assert hook(initialised_repo, "start", {"session_id": "linked", "source": "startup"}).returncode == 0
    kept = open_file.read_bytes()
    assert hook(initialised_repo, "end", {"session_id": "linked", "reason": "other"}).returncode == 0
    (record,) = (p for p in (initialised_repo / SESSIONS).glob("*.md") if "--s-" in p.name)
    temp = record.with_name(f".{record.name}.{dead_pid()}-{dead_pid()}-0123abcd.tmp")
    temp.write_bytes(record.read_bytes())
    open_file.write_bytes(kept)
    again = hook(initialised_repo, "end", {"session_id": "linked", "reason": "other"})
    assert again.returncode == 0 and b"adds none" in again.stderr, again.stderr
    assert not temp.exists() and record.exists() and not open_file.exists()
