"""Stdio framing: one JSON message per line in, one per line out; stdout carries frames only.

`claim_stdout` moves fd 1 aside for frames and points fd 1 at stderr, so nothing else in the
process (a print, a library's warning) can ever put a non-frame on the client's stdout. Reading
uses the raw fd, never `sys.stdin`, so a reader thread blocked at shutdown holds no buffer lock.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator

from majordomus.mcp.core import MAX_FRAME_BYTES

TOO_LARGE = b"\x00too-large"  # a sentinel no JSON text can equal: the frame was cut and skipped


def claim_stdout() -> int:
    """A private descriptor for frames; fd 1 (and `sys.stdout`) now lead to stderr."""
    frames = os.dup(1)
    os.set_inheritable(frames, False)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return frames


def read_frames(fd: int = 0, limit: int = MAX_FRAME_BYTES) -> Iterator[bytes]:
    """Yield each non-blank line (without its line ending) until EOF; a line over `limit` yields TOO_LARGE."""
    pending = bytearray()
    skipping = False
    while True:
        try:
            chunk = os.read(fd, 65536)
        except InterruptedError:  # pragma: no cover - PEP 475 retries for us
            continue
        except OSError:
            chunk = b""
        if not chunk:
            if pending.strip() and not skipping:
                yield bytes(pending).strip(b"\r")
            return
        start = 0
        while True:
            newline = chunk.find(b"\n", start)
            if newline < 0:
                if not skipping:
                    pending += chunk[start:]
                    if len(pending) > limit:
                        pending.clear()
                        skipping = True
                        yield TOO_LARGE
                break
            if skipping:
                skipping = False  # the oversized line ends here; what follows is a new frame
            else:
                pending += chunk[start:newline]
                line = bytes(pending).strip(b"\r")
                pending.clear()
                if len(line) > limit:
                    yield TOO_LARGE
                elif line.strip():
                    yield line
            start = newline + 1


class FrameWriter:
    """Writes whole frames under a lock; after a broken pipe it stays closed and says so."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.closed = False
        self._lock = threading.Lock()

    def write(self, frame: bytes) -> bool:
        data = frame + b"\n"
        with self._lock:
            if self.closed:
                return False
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(self.fd, view):]
            except OSError:  # the client closed its end: the session is over
                self.closed = True
                return False
        return True
