"""The archive as a whole: one pass that reads every record once, the lock its rewriters share, a rewrite.

Reconcile, prune, render and doctor's findings read through `scan`; each record is read and parsed once.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TypeVar

from majordomus.archive import record as rec
from majordomus.archive.render import write_renderings
from majordomus.layout import PRIVATE_FILE, Layout, file_lock, refuse_symlink, temp_name


@dataclass
class Entry:
    """One file under a record's name: the record, or why this writer cannot account for it; and its bytes."""

    name: str
    directory: Path
    record: rec.PromptRecord | None
    problem: str | None
    pretty: bool
    raw: bytes = b""  # the record's bytes as read: what its renderings' fingerprint is taken of
    mode: int = 0  # with `entries(..., modes=True)`: the st_mode of the file its read opened (0: not asked, or unread)

    @property
    def path(self) -> Path:
        return self.directory / self.name

    @property
    def stem(self) -> str:
        return self.name[: -len(".json")]


SHOWN = 5  # files named in one finding; the count is always whole


@dataclass
class Named:
    """A count and the first few names it counts: a person sees where to look, never a wall of names."""

    count: int = 0
    first: list[str] = field(default_factory=list)
    problem: str | None = None

    def add(self, name: str, problem: str | None = None) -> None:
        if not self.count:
            self.problem = problem
        self.count += 1
        if len(self.first) < SHOWN:
            self.first.append(name)

    def merge(self, other: Named) -> None:
        """Another part's names after these: the count whole, the first few still the first in order."""
        if not self.count:
            self.problem = other.problem
        self.count += other.count
        self.first += other.first[:SHOWN - len(self.first)]

    def names(self) -> str:
        more = f" and {self.count - SHOWN} more" if self.count > SHOWN else ""
        return ", ".join(self.first) + more

    def refused(self) -> str:
        """The clause reconcile's and prune's sentences end with when records were refused: how many, which, why."""
        if not self.count:
            return ""
        why = f" (the first {self.problem})" if self.problem else ""
        return f", {self.count} refused (this writer cannot account for every member): {self.names()}{why}"


def record_names(layout: Layout) -> list[str]:
    """Every record's file name, oldest first (the name starts with the capture second)."""
    try:
        names = os.listdir(layout.prompts_dir)
    except FileNotFoundError:
        return []
    return sorted(n for n in names if rec.is_record_name(n))


T = TypeVar("T")

SPLIT_AT = 8192  # records: below this a second process saves less than its fork costs


def halves(names: list[str], work: Callable[[list[str]], T]) -> list[T]:
    """`work` over `names` in order, as one part or two: with a second core, the first half here and the second in
    a forked child at the same time, its answer pickled back through a pipe (doctor, reconcile and render over
    100k records: most of their time is system calls, which two processes make side by side).

    Nothing is lost when the child fails (killed, an exception, an answer that does not load): this process does
    that half itself, and raises what it raises. `work` must print nothing and may write only what a repeat of it
    writes the same (a rendering); the child exits without flushing anything of this process."""
    if len(names) < SPLIT_AT or not _second_core():
        return [work(names)]
    import pickle

    cut = len(names) // 2
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its half, its answer, and out without running anything of the parent's
        code = 70
        try:
            os.close(read_end)
            view = memoryview(pickle.dumps(work(names[cut:]), protocol=pickle.HIGHEST_PROTOCOL))
            while view:
                view = view[os.write(write_end, view):]
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    try:
        first = work(names[:cut])
        chunks = []
        while chunk := os.read(read_end, 1 << 20):
            chunks.append(chunk)
    except BaseException:
        with contextlib.suppress(OSError):
            os.kill(pid, 9)
        os.waitpid(pid, 0)
        raise
    finally:
        os.close(read_end)
    _, status = os.waitpid(pid, 0)
    if status == 0:
        with contextlib.suppress(Exception):
            return [first, pickle.loads(b"".join(chunks))]
    return [first, work(names[cut:])]


def _second_core() -> bool:
    """Linux's own answer on the cores this process may run on; elsewhere, one part (a fork is Linux's to trust)."""
    try:
        return len(os.sched_getaffinity(0)) > 1
    except (AttributeError, OSError):
        return False


def scan(layout: Layout, names: list[str] | None = None) -> list[Entry]:
    """Every entry at once: for a few records (tests, one name); the archive's commands stream `entries`."""
    return list(entries(layout, names))


def entries(layout: Layout, names: Iterable[str] | None = None, *, modes: bool = False) -> Iterator[Entry]:
    """Each record read and parsed in turn, oldest first: a caller that keeps only what it needs of each holds
    one parsed record at a time, never the archive (100k records parsed at once were 450 MiB).

    With `modes`, each entry carries the mode of the very file read (an fstat of the fd the read opened: doctor's
    privacy check of records, without a stat by name of its own)."""
    directory = layout.prompts_dir
    base = os.fspath(directory)
    try:
        dir_fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:  # no archive (or a link in its place, which has_archive refuses): nothing to read
        return
    try:
        # each name looked up in the directory's fd, not by its whole path
        for name in record_names(layout) if names is None else names:
            mode = 0
            try:
                if modes:
                    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
                    try:
                        mode = os.fstat(fd).st_mode
                        raw = rec.read_fd(fd)
                    finally:
                        os.close(fd)
                else:
                    raw = rec.read_bytes(name, dir_fd)
            except OSError as exc:
                if modes and not mode:  # not opened (no read permission, say): its mode by name, links not followed
                    with contextlib.suppress(OSError):
                        mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
                # ELOOP: a symlink under a record's name, refused rather than followed
                why = "is a symbolic link" if os.path.islink(os.path.join(base, name)) else \
                    f"cannot be read ({exc.strerror})"
                yield Entry(name, directory, None, why, False, mode=mode)
                continue
            try:
                yield Entry(name, directory, rec.parse(raw), None, rec.is_pretty(raw), raw, mode)
            except rec.RecordError as exc:
                yield Entry(name, directory, None, str(exc), False, mode=mode)
    finally:
        os.close(dir_fd)


@contextlib.contextmanager
def lock_archive(layout: Layout) -> Iterator[None]:
    """Held by reconcile, prune and render while they rewrite: two rewriters never race on one record.

    Capture never takes it: a capture only creates new names, exclusively.
    """
    with file_lock(layout.locks / "prompts.lock"):
        yield


def rewrite(layout: Layout, entry: Entry, record: rec.PromptRecord) -> None:
    """Replace a record and both renderings (never a partial record under its name)."""
    with Rewriter(layout) as rewriter:
        rewriter.add(entry, record)


class Rewriter:
    """Rewrites records in batches, each record exactly as durable as one rewritten alone.

    Per record, as ever: both renderings first (in place, no fsync: rebuildable), then the record's temp file,
    fsynced, renamed over the record — so a kill between the two leaves a record that still asks for the rewrite
    (the next run redoes it), never a record whose body was taken beside renderings that keep it. What changes
    is the order across records: the temps of a batch are all written before the first is fsynced, so the
    fsyncs after the first find their journal already committed (200 small files fsynced interleaved: 2.2–4.8 ms
    each here, batched 0.4–2.2 ms: most of a first prune), and they run several at once (`fsync_all`). A
    record is renamed only after its own fsync, in order; a failure leaves the records not yet renamed whole, and
    their temps removed. `done` counts records renamed."""

    BATCH = 128

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self.done = 0
        self._pending: list[tuple[Entry, rec.PromptRecord]] = []

    def __enter__(self) -> Rewriter:
        return self

    def __exit__(self, kind: object, *_: object) -> None:
        if kind is None:
            self.flush()
        self._pending.clear()

    def add(self, entry: Entry, record: rec.PromptRecord) -> None:
        self._pending.append((entry, replace(record, schema=rec.SCHEMA)))
        if len(self._pending) >= self.BATCH:
            self.flush()

    def flush(self) -> None:
        pending, self._pending = self._pending, []
        temps: list[tuple[Entry, rec.PromptRecord, bytes, Path, int]] = []
        try:
            for entry, record in pending:
                data = rec.dumps(record)
                write_renderings(self.layout.prompts_dir, entry.stem, record, record_bytes=data)
                refuse_symlink(entry.path)
                tmp = temp_name(entry.path)
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, PRIVATE_FILE)
                temps.append((entry, record, data, tmp, fd))
                os.fchmod(fd, PRIVATE_FILE)
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
            synced = fsync_all([fd for *_, fd in temps])
            while temps:
                entry, record, data, tmp, fd = temps[0]
                failure = synced.pop(0)
                if failure is not None:
                    raise failure
                os.close(fd)
                temps[0] = (entry, record, data, tmp, -1)
                os.replace(tmp, entry.path)
                temps.pop(0)
                entry.record, entry.pretty, entry.raw = record, True, data
                self.done += 1
        finally:
            for _, _, _, tmp, fd in temps:  # not renamed: the record under its name is still whole
                if fd != -1:
                    os.close(fd)
                with contextlib.suppress(OSError):
                    os.unlink(tmp)


FSYNC_THREADS = 8


def fsync_all(fds: list[int]) -> list[OSError | None]:
    """Each fd fsynced, several at once: a disk merges the cache flushes of concurrent fsyncs (1,024 small files
    here: 170–210 µs each one after another, 85–135 µs with 4–16 at once). Each fd's failure, or None, in order."""
    failures: list[OSError | None] = [None] * len(fds)
    if len(fds) < 2:
        for i, fd in enumerate(fds):
            try:
                os.fsync(fd)
            except OSError as exc:
                failures[i] = exc
        return failures
    import threading

    todo = iter(range(len(fds)))  # a range iterator's next is one step under the GIL: each index taken once
    def work() -> None:
        for i in todo:
            try:
                os.fsync(fds[i])
            except OSError as exc:
                failures[i] = exc

    workers = [threading.Thread(target=work, daemon=True) for _ in range(min(FSYNC_THREADS, len(fds)))]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return failures


def has_archive(layout: Layout) -> bool:
    """Whether there is an archive to work on; a symlinked archive directory is refused, never followed."""
    from majordomus.errors import RefusedError

    if layout.prompts_dir.is_symlink():
        raise RefusedError(f"{layout.prompts_dir.relative_to(layout.root)} is a symbolic link; the archive is "
                           "never followed through a link",
                           "replace it with a real directory, then run majordomus update")
    return layout.prompts_dir.is_dir()
