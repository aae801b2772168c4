"""A start in progress: while `capture session --event start` draws an episode, it leaves a mark for its session.

Copilot CLI runs SessionStart and UserPromptSubmit at the same moment (REAL-CLIENTS.md, 1.0.102), so with a
slow start the prompt hook finds no open episode yet. A prompt that arrives while its session's start is still
running belongs to that episode (SPEC §5.4): the mark is the evidence, not nearness in time. The prompt hook
seeing a mark of a live start waits for the open file (bounded) and links the prompt `open`.

The mark is `state/starting/<session key>` holding the start's pid; it is removed when the start returns. A mark
whose pid is gone (a start killed mid-way) is ignored. Stdlib only, and cheap: the hook path uses it.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

from majordomus.episodes import store
from majordomus.identity import session_key
from majordomus.layout import PRIVATE_FILE, Layout, ensure_dir, pid_alive

# The prompt hook's own timeout is 10 s (capture install); a start that takes longer than this is not waited for
WAIT_SECONDS = 8.0
POLL_SECONDS = 0.02
# A client whose prompt hook and SessionStart start at the same moment: both processes pay the same start-up, so
# the start's mark may be a few milliseconds behind the prompt hook's first look. This long, and no longer, a
# prompt with no open episode looks again for the mark (only for a row that declares `start_races`).
RACE_SECONDS = 0.5

if TYPE_CHECKING:
    from pathlib import Path


def _mark_path(layout: Layout, provider_session: str) -> Path:
    return layout.state / "starting" / session_key(provider_session)


def mark(layout: Layout, provider_session: str) -> Path | None:
    """Say that this process is opening the episode of `provider_session`; None when the mark cannot be left."""
    path = _mark_path(layout, provider_session)
    try:
        ensure_dir(path.parent)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, PRIVATE_FILE)
        try:
            os.write(fd, str(os.getpid()).encode())
        finally:
            os.close(fd)
    except (OSError, ValueError):
        return None  # the mark only helps a racing prompt; the start goes on without it
    return path


def clear(path: Path | None) -> None:
    if path is None:
        return
    try:
        os.unlink(path)
    except OSError:
        pass


def pending(layout: Layout, provider_session: str) -> bool:
    """A start of this session is running now: its mark exists and its process is alive."""
    path = _mark_path(layout, provider_session)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        try:
            pid = int(os.read(fd, 32) or b"0")
        finally:
            os.close(fd)
    except (OSError, ValueError):
        return False
    return pid > 0 and pid_alive(pid)


def racing(layout: Layout, provider_session: str, seconds: float = RACE_SECONDS) -> bool:
    """A start of this session is running, or begins within `seconds` (a client that starts both hooks at once)."""
    deadline = time.monotonic() + seconds
    while True:
        if pending(layout, provider_session) or store.read_open(layout, provider_session) is not None:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_SECONDS)


def wait_open(layout: Layout, provider_session: str, seconds: float = WAIT_SECONDS) -> store.OpenFile | None:
    """The open episode once the running start has written it; None when the start ends without one, or is slow."""
    deadline = time.monotonic() + seconds
    while True:
        opened = store.read_open(layout, provider_session)
        if opened is not None:
            return opened
        if not pending(layout, provider_session) or time.monotonic() >= deadline:
            return store.read_open(layout, provider_session)  # the start may have finished between the two reads
        time.sleep(POLL_SECONDS)
