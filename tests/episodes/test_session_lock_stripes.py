"""The session locks are 256 stripe files, not one file per session ever.

A lock file per session was never removed: the locks directory grew by one file for every session the repository
ever saw, and every new episode paid a file create for it (on this machine's ext4, which scans past every inode
freed in the last 30 s, 20-820 us: an attach's slowest step). Two sessions of one stripe wait only for each other's
boundaries, and no code path holds two session locks at once.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from majordomus.episodes.store import session_lock
from majordomus.identity import session_key
from majordomus.layout import Layout
from mcp_support import McpProcess, attach_one, auth, initialize, open_file
from support import MAJORDOMUS, hook, session_payload

STRIPE = re.compile(r"session\.[0-9a-f]{2}\.lock")


def session_locks(repo: Path) -> list[str]:
    return sorted(p.name for p in (repo / ".ai/local/state/locks").iterdir() if p.name.startswith("session."))


def test_thirty_sessions_of_server_and_hooks_leave_only_stripe_locks(initialised_repo: Path) -> None:
    """1. a shared server; 2. 20 HTTP peers attach; 3. 10 hook sessions start and end. Result: 30 episodes
    opened, the 10 hook ones closed; every session lock is a stripe file (`session.<2 hex>.lock`), none named
    after a session, at most one per session and never more than 256."""
    with McpProcess(initialised_repo, "--http-port", "0") as proc:
        url = proc.url()
        proc.request(initialize("owner"))
        owner = auth(initialised_repo)
        lines = [attach_one(url, owner, i) for i in range(20)]
        for n in range(10):
            assert hook(initialised_repo, "start", {"session_id": f"hook-{n}", "source": "startup"}).returncode == 0
            assert hook(initialised_repo, "end", {"session_id": f"hook-{n}", "reason": "exit"}).returncode == 0
        opened = [open_file(initialised_repo, f"thread-{i}") for i in range(20)]
        proc.kill()
    assert [line for line in lines if " opened at " not in line] == []
    assert all(o is not None for o in opened)
    assert all(open_file(initialised_repo, f"hook-{n}") is None for n in range(10))
    locks = session_locks(initialised_repo)
    assert locks and all(STRIPE.fullmatch(name) for name in locks), locks
    assert len(locks) <= 30
    layout = Layout(initialised_repo)
    expected = {session_lock(layout, session_key(f"thread-{i}")).name for i in range(20)} | {
        session_lock(layout, session_key(f"hook-{n}")).name for n in range(10)}
    assert set(locks) == expected


def test_a_session_waits_for_a_boundary_of_its_own_stripe_and_not_of_another(initialised_repo: Path) -> None:
    """1. the stripe of session `a` is held (as a long close of a session of that stripe would hold it);
    2. a start of `a`, and a start of `b` of another stripe. Result: `b` opens at once while `a` waits; when
    the stripe is let go, `a` opens too."""
    import fcntl

    layout = Layout(initialised_repo)
    held_path = session_lock(layout, session_key("a"))
    assert held_path != session_lock(layout, session_key("b")), "pick ids of two stripes"
    held_path.parent.mkdir(parents=True, exist_ok=True)
    with open(held_path, "a+b") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        waiting = subprocess.Popen([str(MAJORDOMUS), "capture", "session", "--provider", "claude-code", "--event",
                                    "start"], cwd=initialised_repo, stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert waiting.stdin is not None
        waiting.stdin.write(session_payload("a"))
        waiting.stdin.close()
        waiting.stdin = None
        other = hook(initialised_repo, "start", {"session_id": "b", "source": "startup"})
        assert other.returncode == 0 and open_file(initialised_repo, "b") is not None
        assert waiting.poll() is None and open_file(initialised_repo, "a") is None
    _, said = waiting.communicate(timeout=60)
    assert waiting.returncode == 0, said
    assert open_file(initialised_repo, "a") is not None
