"""Every path under `.ai/`, the modes they must have, atomic writes, symlink refusal and locks.

Stdlib only: the hook path imports this.
"""

from __future__ import annotations

import _stat as stat  # builtin, as `stat` is not (its S_* functions are these)
import _thread
import fcntl
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from majordomus.errors import InternalError, MissingError, RefusedError

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

PRIVATE_FILE = 0o600
PRIVATE_DIR = 0o700


class _Under:
    """A path of the layout: `child` under another of its paths (or its root), joined once per layout. A hook
    and an attach ask for these dozens of times each, and every pathlib join costs a few microseconds."""

    def __init__(self, parent: str, child: str) -> None:
        self.parent = parent
        self.child = child
        self.key = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.key = f"_{name}"

    def __get__(self, layout: Layout, owner: type | None = None) -> Path:
        memo = layout.__dict__  # a frozen record's own dictionary: not a field, never compared or hashed
        found: Path | None = memo.get(self.key)
        if found is None:
            found = memo[self.key] = getattr(layout, self.parent) / self.child
        return found


@dataclass(frozen=True)
class Layout:
    """The `.ai/` layer of one worktree. Only paths: nothing here touches the disk."""

    root: Path

    ai = _Under("root", ".ai")
    repo_dir = _Under("ai", "repo")
    policy_file = _Under("repo_dir", "policy.yaml")
    sessions_dir = _Under("repo_dir", "sessions")
    local = _Under("ai", "local")
    state = _Under("local", "state")
    ledger_file = _Under("state", "ledger.jsonl")
    sessions_open = _Under("state", "sessions-open")
    session_current = _Under("state", "session-current.yaml")
    locks = _Under("state", "locks")
    mcp_dir = _Under("state", "mcp")
    lease_file = _Under("mcp_dir", "server.json")
    policy_cache = _Under("state", "policy.cache.json")
    contexts_dir = _Under("local", "session-contexts")
    # the log beside the working contexts: every failure of `capture session` lands here
    context_log = _Under("contexts_dir", ".session-context.log")
    prompts_dir = _Under("local", "prompts")
    capture_log = _Under("prompts_dir", ".capture.log")
    hook_failures_log = _Under("local", "hook-failures.log")  # written by scripts/majordomus-hook, read by doctor

    def open_file(self, key: str) -> Path:
        """The open-episode file of a provider-session key (already sanitised by identity)."""
        return self.sessions_open / f"{key}.yaml"

    def is_initialised(self) -> bool:
        return self.policy_file.is_file() and self.state.is_dir()

    def require(self) -> Layout:
        """This layout, or exit 12 naming `majordomus init`: every command past init needs the layer.

        Exit 15 when one of the layer's directories is a symbolic link: every write below it would land
        wherever the link points (a few lstat calls, cheap enough for every hook)."""
        self.refuse_links()
        if not self.is_initialised():
            raise MissingError(f"{self.root} has no majordomus layer", "run majordomus init")
        return self

    def refuse_links(self) -> None:
        """RefusedError (exit 15) naming the first of the layer's directories that is a symbolic link (the
        archive and contexts directories are refused by each write into them: a linked archive fails a capture
        with exit 13 and must not stop the episodes)."""
        for path in (self.ai, self.repo_dir, self.sessions_dir, self.local, self.state, self.locks,
                     self.sessions_open, self.mcp_dir):
            refuse_symlink(path)

    def private_dirs(self) -> tuple[Path, ...]:
        """Directories that hold what only this user may read."""
        return (self.local, self.state, self.sessions_open, self.locks, self.mcp_dir,
                self.contexts_dir, self.prompts_dir)

    def all_dirs(self) -> tuple[Path, ...]:
        return (self.ai, self.repo_dir, self.sessions_dir, *self.private_dirs())


def refuse_symlink(path: Path) -> None:
    """A symlinked record or archive could send private bytes anywhere: refuse, never follow."""
    if path.is_symlink():
        raise RefusedError(f"{path} is a symbolic link; majordomus does not follow links in .ai/",
                           f"replace it with a real {'directory' if path.is_dir() else 'file'}")


def ensure_dir(path: Path, mode: int = PRIVATE_DIR) -> None:
    """Create `path` (and parents) and set its mode whatever the umask.

    A directory that is there already, not a link and of the right mode costs one lstat (it is asked on every
    boundary: four system calls each, and each a release of the GIL a busy server's other threads contend for)."""
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        found = None
    if found is not None and stat.S_ISDIR(found.st_mode) and stat.S_IMODE(found.st_mode) == mode:
        return
    refuse_symlink(path)
    path.mkdir(parents=True, exist_ok=True)
    refuse_symlink(path)
    if stat.S_IMODE(path.stat().st_mode) != mode:
        os.chmod(path, mode)


def temp_name(path: Path) -> Path:
    """A temp file beside `path` that no other writer can pick: `.<name>.<pid>-<thread>-<random>.tmp`.

    Threads of one server share the pid, so the thread id and 8 random hex digits join it (O_EXCL refuses a
    clash anyway). The pid stays readable: `sweep_stale_temps` removes the temp of a writer that is gone."""
    return path.with_name(f".{path.name}.{os.getpid()}-{_thread.get_native_id()}-{os.urandom(4).hex()}.tmp")


TEMP_NAME = r"\.(?P<name>.+)\.(?P<pid>\d+)(?:-\d+-[0-9a-f]{8}|\.[0-9a-f]{8})\.tmp"  # compiled when a sweep runs
STALE_TEMP_SECONDS = 600  # older than any write in progress, whoever wrote it


def temp_pid(name: str) -> int | None:
    """The writer's pid in a temp name that TEMP_NAME matches, else None (read without `re`: a close runs this)."""
    if not (name.startswith(".") and name.endswith(".tmp")):
        return None
    stem = name[1:-len(".tmp")]
    head, dot, tail = stem.rpartition(".")
    if not dot or not head:
        return None
    hexdigits = "0123456789abcdef"
    parts = tail.split("-")
    if len(parts) == 3 and parts[0].isdigit() and parts[1].isdigit() and len(parts[2]) == 8 \
            and all(c in hexdigits for c in parts[2]):
        return int(parts[0])  # .<name>.<pid>-<thread>-<8 hex>.tmp
    if len(tail) == 8 and all(c in hexdigits for c in tail):  # .<name>.<pid>.<8 hex>.tmp, an older writer
        name_part, dot, pid = head.rpartition(".")
        if dot and name_part and pid.isdigit() and pid.isascii():
            return int(pid)
    return None


def sweep_stale_temps(directory: Path, *, now: float | None = None) -> int:
    """Remove the temp files that killed writes left in `directory` (never a record: a rename never came).

    A temp is stale when its writer's pid is gone or it is older than any write in progress; the temp of a
    live writer is left alone. Links and other hidden files are never touched. Returns how many went."""
    now = time.time() if now is None else now
    removed = 0
    try:
        entries = os.scandir(directory)
    except OSError:
        return 0
    with entries:
        for entry in entries:
            if not (entry.name.startswith(".") and entry.name.endswith(".tmp")):
                continue
            pid = temp_pid(entry.name)
            try:
                if not entry.is_file(follow_symlinks=False):
                    continue
                old = now - entry.stat(follow_symlinks=False).st_mtime > STALE_TEMP_SECONDS
                if old or (pid is not None and not pid_alive(pid)):
                    os.unlink(entry.path)
                    removed += 1
            except OSError:
                continue  # another sweeper took it, or it was renamed into place meanwhile
    return removed


def pid_alive(pid: int) -> bool:
    """The process exists (ours counts; another user's counts too: kill(0) is refused, not missing)."""
    if pid <= 0 or pid == os.getpid():
        return pid == os.getpid()
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except PermissionError:
        return True
    return True


def write_atomic(path: Path, data: bytes, mode: int = PRIVATE_FILE, *, sync: bool = True) -> None:
    """Write a temp file beside `path`, fsync, rename: a reader sees the old bytes or the new, never half.

    `sync=False` skips the fsync where the threat is the writer's own death, not the machine's (a server that
    is SIGKILLed milliseconds after SIGTERM): the rename is then as atomic, and the page cache outlives us."""
    refuse_symlink(path)
    tmp = temp_name(path)
    _write_new(tmp, data, mode, sync)
    os.replace(tmp, path)


def _write_new(tmp: Path, data: bytes, mode: int, sync: bool) -> None:
    """A new temp file holding `data`, with exactly `mode`; removed again when anything fails."""
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    try:
        os.fchmod(fd, mode)  # the umask must not widen or narrow what we declared
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        if sync:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        _unlink_quietly(tmp)
        raise
    os.close(fd)


def create_exclusive(path: Path, data: bytes, mode: int = PRIVATE_FILE, *, durable: bool = False) -> bool:
    """Publish `path` only if nothing is there yet (write temp, then hard-link). False when taken.

    The bytes are fsynced before the link; `durable` fsyncs the directory after it too, so the new name
    itself survives a crash of the machine (a record: see docs/decisions.md, "What the hooks fsync")."""
    return create_first(path.parent, iter((path.name,)), data, mode, durable=durable) is not None


def create_first(directory: Path, names: Iterator[str], data: bytes, mode: int = PRIVATE_FILE, *,
                 durable: bool = False) -> str | None:
    """`create_exclusive` under the first of `names` still free in `directory`: the bytes are written and fsynced
    once, then hard-linked under each name in turn until one is not taken (a clash costs a link(), not a write
    and an fsync). The name published, or None when `names` ran out."""
    tmp: Path | None = None
    try:
        for name in names:
            path = directory / name
            if tmp is None:
                tmp = temp_name(path)  # a link under `path` is never followed: link() fails with EEXIST, like any name
                _write_new(tmp, data, mode, True)
            try:
                os.link(tmp, path)
            except FileExistsError:
                continue
            if durable:
                fsync_dir(directory)
            return name
        return None
    finally:
        if tmp is not None:
            _unlink_quietly(tmp)


def fsync_dir(directory: Path) -> None:
    """Make the names in `directory` durable (a created, linked or renamed entry), as fsync does a file's bytes."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def append_line(path: Path, line: str, mode: int = PRIVATE_FILE) -> None:
    """Append one line with a single write on an O_APPEND descriptor: concurrent appenders interleave whole lines."""
    refuse_symlink(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, mode)
    try:
        if stat.S_IMODE(os.fstat(fd).st_mode) != mode:
            os.fchmod(fd, mode)
        os.write(fd, (line.rstrip("\n") + "\n").encode("utf-8", "surrogateescape"))
    finally:
        os.close(fd)


class file_lock:  # noqa: N801 - used like a function: `with file_lock(path):`
    """An advisory lock held for a read-modify-write; released when the process dies.

    Exclusive by default; `shared` admits every other shared holder and waits only for an exclusive one
    (appenders share, a rewrite of the whole file excludes them). A class rather than
    `contextlib.contextmanager`: the hook path does not import contextlib.
    """

    def __init__(self, path: Path, *, shared: bool = False) -> None:
        self.path = path
        self.fd = -1
        self.mode = fcntl.LOCK_SH if shared else fcntl.LOCK_EX

    def __enter__(self) -> None:
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW
        try:
            try:
                self.fd = os.open(self.path, flags, PRIVATE_FILE)
            except FileNotFoundError:  # the locks directory only: a missing layer is never created here
                try:
                    os.mkdir(self.path.parent, PRIVATE_DIR)
                    os.chmod(self.path.parent, PRIVATE_DIR)  # whatever the umask
                except FileExistsError:
                    pass
                self.fd = os.open(self.path, flags, PRIVATE_FILE)
        except OSError as exc:
            raise InternalError(f"cannot take the lock {self.path.name}: {exc.strerror}") from exc
        try:
            fcntl.flock(self.fd, self.mode)
        except BaseException:
            os.close(self.fd)
            raise

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)


def _unlink_quietly(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
