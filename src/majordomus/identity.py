"""Who and when: repository_id, worktree_id, episode ids, timestamps, the provider-session key.

Stdlib only: the hook path imports this. One function computes each identity; every writer uses it.
"""

from __future__ import annotations

import _thread
import os
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from majordomus.errors import MissingError

if TYPE_CHECKING:
    from datetime import datetime
    from hashlib import sha256 as sha256
    from pathlib import Path
else:
    # the builtin module: hashlib would load OpenSSL, 3 ms of every hook run; asked by version, as a failed
    # import costs a walk of sys.path
    try:
        if sys.version_info >= (3, 12):
            from _sha2 import sha256
        else:  # 3.11 calls it _sha256
            from _sha256 import sha256
    except ImportError:  # pragma: no cover - a build without the builtin hashes
        from hashlib import sha256

GIT_TIMEOUT = 0.8  # seconds; a hook has 1-1.5 s in all (CLIENTS.md), git must not eat it


# A moment is a datetime (most commands) or whole seconds since the epoch (the hook path, `now_s`): `datetime`
# costs a hook ~1.5 ms of imports, and `time.strftime` spells a UTC second the same way.
def now_utc() -> datetime:
    from datetime import datetime, timezone

    return datetime.now(timezone.utc).replace(microsecond=0)


def now_s() -> int:
    """Now, to the second, as `now_utc` would say it (the same clock, floored)."""
    return int(time.time())


def _strftime(moment: datetime | float, spec: str) -> str:
    if isinstance(moment, (int, float)):
        return time.strftime(spec, time.gmtime(moment))
    from datetime import timezone

    return moment.astimezone(timezone.utc).strftime(spec)


def rfc3339(moment: datetime | float) -> str:
    """`2026-12-02T08:00:00Z`: UTC, to the second."""
    return _strftime(moment, "%Y-%m-%dT%H:%M:%SZ")


def compact_stamp(moment: datetime | float) -> str:
    """`20261202T080000Z`, for file names that sort by time."""
    return _strftime(moment, "%Y%m%dT%H%M%SZ")


def second_stamp(moment: datetime | float) -> str:
    """`YYYYMMDDHHMMSS`, UTC: a prompt record's file name starts with it."""
    return _strftime(moment, "%Y%m%d%H%M%S")


def day_stamp(moment: datetime | float) -> str:
    """`YYYYMMDD`, the UTC day."""
    return _strftime(moment, "%Y%m%d")


def parse_rfc3339(text: str) -> datetime | None:
    from datetime import datetime, timezone

    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    except (TypeError, ValueError):
        return None


def epoch_of(text: str) -> int | None:
    """`parse_rfc3339` as epoch seconds, without `datetime` for the form `rfc3339` writes (every moment majordomus
    stores); any other spelling strptime accepts is left to it."""
    if (len(text) == 20 and text[4] == text[7] == "-" and text[10] == "T" and text[13] == text[16] == ":"
            and text[19] == "Z" and (text[:4] + text[5:7] + text[8:10] + text[11:13] + text[14:16]
                                     + text[17:19]).isdigit() and text.isascii()):
        year, month, day = int(text[:4]), int(text[5:7]), int(text[8:10])
        hour, minute, second = int(text[11:13]), int(text[14:16]), int(text[17:19])
        leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
        last = (31, 29 if leap else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)[month - 1] if 1 <= month <= 12 else 0
        if year >= 1 and 1 <= day <= last and hour <= 23 and minute <= 59 and second <= 59:
            return _days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second
    parsed = parse_rfc3339(text)
    return None if parsed is None else int(parsed.timestamp())


def _days_from_civil(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (the civil-from-days inverse, in integers)."""
    year -= month <= 2
    era = year // 400
    year_of_era = year - era * 400
    day_of_year = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    return era * 146097 + day_of_era - 719468


def new_episode_id(moment: datetime | float) -> str:
    """`s-YYYYMMDDHHMMSS-xxxx` (UTC, four random hex)."""
    return f"s-{second_stamp(moment)}-{os.urandom(2).hex()}"


_KEY_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_NAME_SAFE = _KEY_SAFE | {"."}
_HEX = frozenset("0123456789abcdef")
_KEY_MAX = 180


def is_sha(text: str) -> bool:
    """40 lowercase hex digits (what `re.fullmatch(r"[0-9a-f]{40}")` accepts)."""
    return len(text) == 40 and _HEX.issuperset(text)


def session_key(provider_session: str) -> str:
    """The one sanitizer from a provider session to a file-name key; every reader and writer uses it.

    Bytes outside `[A-Za-z0-9_-]` are percent-encoded (so `.` and `/` can never survive: no `..`, no
    separator), the empty string is `%`, and a key too long for a file name keeps its head and adds a
    `~` plus a digest of the whole (`~` is always encoded elsewhere, so distinct inputs stay distinct).
    """
    encoded = "".join(
        ch if ch in _KEY_SAFE else "".join(f"%{b:02X}" for b in ch.encode("utf-8", "surrogatepass"))
        for ch in provider_session
    )
    if not encoded:
        return "%"
    if len(encoded) > _KEY_MAX:
        digest = sha256(provider_session.encode("utf-8", "surrogatepass")).hexdigest()[:32]
        encoded = f"{encoded[:120]}~{digest}"
    return encoded


def name_key(text: str, limit: int = 64) -> str:
    """A readable fragment for a file name (a branch): `[A-Za-z0-9._-]`, never empty, never `..`."""
    out: list[str] = []
    for ch in text:
        if ch in _NAME_SAFE:
            out.append(ch)
        elif not out or out[-1] != "\0":
            out.append("\0")  # one separator for each run of other characters, as re.sub(...+) did
    cleaned = "".join(out).replace("\0", "-").strip("-.")[:limit]
    return cleaned or "none"


def run_bounded(argv: list[str], timeout: float, limit: int = 4 * 1024 * 1024) -> tuple[int | None, bytes]:
    """Run a program with stdin and stderr on /dev/null; (exit status or None on failure/timeout, stdout).

    Spawned with posix_spawn and read with select: the `subprocess` module would cost every hook
    ~6 ms of imports (locale, signal, threading, selectors). It runs with GIT_OPTIONAL_LOCKS=0 (every
    program run here is a read-only git). A child past its deadline gets SIGTERM, on which git removes any
    lock file it holds, and SIGKILL only if it is still there STOP_GRACE seconds later. A program `start_early`
    started with the same argv is not started again: its answer is collected.
    """
    running = _EARLY.pop(tuple(argv), None) or _spawn(argv)
    if running is None:
        return None, b""
    return _collect(running, timeout, limit)


# Programs a hook started before it imported what it needs them for, by argv: they run on another core meanwhile.
_EARLY: dict[tuple[str, ...], tuple[int, int]] = {}


def start_early(argv: list[str]) -> None:
    """Start a read-only program whose answer `run_bounded` will be asked for with the same argv: a hook's
    `git status` (2-3 ms) then runs while the hook imports and reads the rest. `drop_early` stops what no one
    asked for."""
    key = tuple(argv)
    if key not in _EARLY:
        running = _spawn(argv)
        if running is not None:
            _EARLY[key] = running


def drop_early() -> None:
    """Stop and reap every program `start_early` started that no one asked for (an episode already open)."""
    while _EARLY:
        _, (pid, read_fd) = _EARLY.popitem()
        os.close(read_fd)  # a git still writing gets EPIPE; one that is done waits to be reaped
        if _stop(pid) is None:
            os.waitpid(pid, 0)


def _spawn(argv: list[str]) -> tuple[int, int] | None:
    """(pid, the read end of its stdout), or None when it cannot start."""
    read_fd, write_fd = os.pipe()
    actions = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0), (os.POSIX_SPAWN_DUP2, write_fd, 1),
               (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0), (os.POSIX_SPAWN_CLOSE, read_fd),
               (os.POSIX_SPAWN_CLOSE, write_fd)]
    try:
        pid = os.posix_spawnp(argv[0], argv, {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}, file_actions=actions)
    except OSError:
        os.close(read_fd)
        os.close(write_fd)
        return None
    os.close(write_fd)
    return pid, read_fd


def _collect(running: tuple[int, int], timeout: float, limit: int) -> tuple[int | None, bytes]:
    import select

    pid, read_fd = running
    chunks: list[bytes] = []
    size = 0
    deadline = time.monotonic() + timeout
    timed_out = False
    status: int | None = None
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([read_fd], [], [], left)[0]:
                timed_out = True
                break
            chunk = os.read(read_fd, 65536)
            if not chunk:
                break
            if size < limit:
                chunks.append(chunk)
                size += len(chunk)
    finally:
        os.close(read_fd)
        if timed_out:
            status = _stop(pid)
        if status is None:
            _, status = os.waitpid(pid, 0)
    if timed_out:
        return None, b"".join(chunks)
    return os.waitstatus_to_exitcode(status), b"".join(chunks)


STOP_GRACE = 0.05  # seconds a git has, after SIGTERM, to remove its lock files and go


def _stop(pid: int) -> int | None:
    """SIGTERM (git's handler removes its lock files), then SIGKILL after STOP_GRACE; the wait status once
    reaped here, None when the caller must still wait."""
    try:
        os.kill(pid, 15)  # SIGTERM; the numbers save importing `signal`
    except ProcessLookupError:
        return None
    until = time.monotonic() + STOP_GRACE
    while time.monotonic() < until:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        time.sleep(0.005)
    try:
        os.kill(pid, 9)  # SIGKILL
    except ProcessLookupError:
        pass
    return None


def git_argv(root: str | Path, *args: str) -> list[str]:
    """A git command line that never takes an optional lock: a `status` killed at its deadline must not
    leave `.git/index.lock` behind to fail the person's next commit (run_bounded sets GIT_OPTIONAL_LOCKS=0 too,
    for the gits git itself starts)."""
    return ["git", "--no-optional-locks", "-C", str(root), *args]


def git_seconds(deadline: float | None, timeout: float) -> float:
    """What a git call may spend: its own bound, or less when a shared deadline comes sooner (less the grace a
    stopped git has, so that even a stopped one is gone by the deadline)."""
    return timeout if deadline is None else min(timeout, deadline - time.monotonic() - STOP_GRACE)


def git(root: str | Path, *args: str, timeout: float = GIT_TIMEOUT, deadline: float | None = None) -> str | None:
    """Run git in `root`; its stdout stripped, or None when it fails or takes too long (or the shared
    `deadline`, a `time.monotonic()` value, has passed)."""
    timeout = git_seconds(deadline, timeout)
    if timeout <= 0:
        return None
    code, out = run_bounded(git_argv(root, *args), timeout)
    if code != 0:
        return None
    return out.decode("utf-8", "replace").strip()


def find_root(start: str | Path) -> Path:
    """The git top level of `start`; exit 12 outside a repository."""
    from pathlib import Path

    return Path(find_root_str(start))


def find_root_str(start: str | Path) -> str:
    """`find_root` as a string (the hook path builds its Path of it).

    Walks up to the first `.git` (a directory, or a worktree's file) in Python: a git process costs a
    hook several milliseconds. With GIT_DIR or GIT_WORK_TREE set, git itself is asked.
    """
    if not (os.environ.get("GIT_DIR") or os.environ.get("GIT_WORK_TREE")):
        here = os.path.abspath(start)
        while True:
            if os.path.exists(os.path.join(here, ".git")):
                return here
            parent = os.path.dirname(here)
            if parent == here:
                break
            here = parent
    top = git(start, "rev-parse", "--show-toplevel", timeout=5)
    if not top:
        raise MissingError(f"{start} is not inside a git repository", "run majordomus inside one, or pass --repo ROOT")
    return top


def _read(path: str) -> str | None:
    """A small file's text (universal newlines, like text mode), or None. Raw descriptors: a text-mode open costs
    seven system calls where this costs four, and an attach reads four of git's files."""
    data = _read_bytes_or_none(path)
    if data is None:
        return None
    text = data.decode("utf-8", "replace")
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def _read_bytes_or_none(path: str) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        chunks: list[bytes] = []
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
    except OSError:  # a directory, or a read error: what text-mode reading said too
        return None
    finally:
        os.close(fd)


# A worktree's git layout (where its git and common directories are, and that refs are files) is kept for a second
# per root, as a server's attaches of one second share one `git status`: a boundary asks twice (its head and its
# repository id), each time three system calls. The origin's URL is kept while the config's stat is unchanged.
_KEPT_SECONDS = 1.0
_GIT_DIRS: dict[str, tuple[float, tuple[str, str] | None]] = {}
_ORIGINS: dict[str, tuple[tuple[int, int, int], str | None]] = {}  # config path -> (its stat, origin url)


def git_dirs(root: str | Path) -> tuple[str, str] | None:
    """(git dir, common dir) of a worktree read from disk, or None when the layout is not the plain one."""
    key = os.fspath(root)
    kept = _GIT_DIRS.get(key)
    now = time.monotonic()
    if kept is not None and now - kept[0] < _KEPT_SECONDS:
        return kept[1]
    found = _GIT_DIRS[key] = (now, _git_dirs(root))
    return found[1]


def _git_dirs(root: str | Path) -> tuple[str, str] | None:
    dot = os.path.join(root, ".git")
    if os.path.isdir(dot):
        gdir = dot
    else:
        text = _read(dot)
        if not text or not text.startswith("gitdir:"):
            return None
        gdir = os.path.normpath(os.path.join(root, text[7:].strip()))
    common_rel = _read(os.path.join(gdir, "commondir"))
    common = os.path.normpath(os.path.join(gdir, common_rel.strip())) if common_rel else gdir
    if os.path.isdir(os.path.join(common, "reftable")):
        return None  # reftable refs are binary: let git read them
    return gdir, common


def _ref_sha(gdir: str, common: str, ref: str) -> str | None:
    for base in (gdir, common):
        text = _read(os.path.join(base, ref))
        if text and is_sha(text.rstrip()):
            return text.rstrip()
    packed = _read(os.path.join(common, "packed-refs")) or ""
    for line in packed.splitlines():
        sha, _, name = line.partition(" ")
        if name == ref and is_sha(sha):
            return sha
    return None


def _strip_userinfo(url: str) -> str:
    """`https://user:token@host/x` must never put its token into a committed record."""
    if "@" not in url:
        return url  # nothing to strip: spares the hook `re`
    import re

    return re.sub(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^/@]*@", r"\1", url)


def _origin_url(common: str) -> str | None:
    """The origin's URL in the config, read again only when the file's stat changed (one call, not four)."""
    path = os.path.join(common, "config")
    try:
        st = os.stat(path)
        seen: tuple[int, int, int] | None = (st.st_mtime_ns, st.st_size, st.st_ino)
    except OSError:
        seen = None
    kept = _ORIGINS.get(path)
    if seen is not None and kept is not None and kept[0] == seen:
        return kept[1]
    url = _read_origin_url(path)
    if seen is not None:
        _ORIGINS[path] = (seen, url)
    return url


def _read_origin_url(path: str) -> str | None:
    section = None
    for line in (_read(path) or "").splitlines():
        line = line.strip()
        if line.startswith("["):
            section = line
            continue
        if section is not None and _is_origin_section(section):
            key, eq, val = line.partition("=")
            if eq and key.strip().lower() == "url":
                return val.strip().strip('"') or None
    return None


def _is_origin_section(line: str) -> bool:
    """`[remote "origin"]`, with any whitespace between the words (`re.fullmatch(r'\\[remote\\s+"origin"\\]')`)."""
    if not (line.startswith("[remote") and line.endswith('"origin"]')):
        return False
    gap = line[len("[remote"):-len('"origin"]')]
    return gap.isspace()


def repository_id(root: str | Path, *, deadline: float | None = None) -> str:
    dirs = git_dirs(root)
    if dirs is not None:
        url = _origin_url(dirs[1])
        common = os.path.abspath(dirs[1])
    else:
        url = git(root, "config", "--get", "remote.origin.url", deadline=deadline)
        common = (git(root, "rev-parse", "--path-format=absolute", "--git-common-dir", deadline=deadline)
                  or os.path.join(root, ".git"))
    if url:
        from majordomus.redact import scrub

        return scrub(_strip_userinfo(url)) or url[:0]  # a token in the path or query is redacted too
    return "local:" + sha256(common.encode()).hexdigest()[:16]


def worktree_id(root: str | Path) -> str:
    key = os.fspath(root)
    found = _WORKTREE_IDS.get(key)
    if found is None:  # realpath walks every component with lstat: once per root and process
        found = _WORKTREE_IDS[key] = sha256(os.path.realpath(root).encode()).hexdigest()[:16]
    return found


_WORKTREE_IDS: dict[str, str] = {}


@dataclass(frozen=True)
class TreeState:
    branch: str
    head: str  # 40 hex, or NONE before the first commit
    working_tree: str  # clean | dirty | unknown


def head_state(root: str | Path, *, deadline: float | None = None) -> tuple[str, str]:
    """(branch, head): the branch redacted (a branch name can hold a token, and it goes into file names,
    records and the ledger)."""
    from majordomus.redact import scrub

    branch, head = _head_state(root, deadline=deadline)
    return scrub(branch) or branch, head


def _head_state(root: str | Path, *, deadline: float | None = None) -> tuple[str, str]:
    """(branch, head) from the files under .git; git is asked only for layouts we do not read."""
    dirs = git_dirs(root)
    text = _read(os.path.join(dirs[0], "HEAD")) if dirs else None
    if dirs is None or text is None:
        out = (git(root, "rev-parse", "HEAD", "--abbrev-ref", "HEAD", deadline=deadline) or "").splitlines()
        if not out:
            return git(root, "symbolic-ref", "--short", "HEAD", deadline=deadline) or "HEAD", "NONE"
        return (out[1] if len(out) > 1 else "HEAD"), (out[0] if is_sha(out[0]) else "NONE")
    text = text.strip()
    if text.startswith("ref:"):
        ref = text[4:].strip()
        branch = ref[len("refs/heads/"):] if ref.startswith("refs/heads/") else ref
        return branch, _ref_sha(dirs[0], dirs[1], ref) or "NONE"
    return "HEAD", text if is_sha(text) else "NONE"


_STATUS_LOCK = _thread.allocate_lock()
_STATUS_SEEN: dict[tuple[str, str, str], tuple[float, str]] = {}  # (root, branch, head) → (when, clean|dirty)


def tree_state(root: str | Path, *, with_status: bool = True, deadline: float | None = None,
               reuse_seconds: float = 0.0) -> TreeState:
    """Branch and head from disk; cleanliness from one bounded `git status` (the layer's own files excluded).

    With `reuse_seconds` (a server opening many connection episodes at once), a cleanliness that one `git
    status` of the same branch and head found less than that long ago is reused, and concurrent callers wait
    for the one status in flight instead of each spawning their own: 100 attaches in one second cost one git."""
    branch, head = head_state(root, deadline=deadline)
    if not with_status:
        return TreeState(branch=branch, head=head, working_tree="unknown")
    if reuse_seconds <= 0:
        return TreeState(branch=branch, head=head, working_tree=_working(root, deadline))
    key = (str(root), branch, head)
    with _STATUS_LOCK:
        seen = _STATUS_SEEN.get(key)
        if seen is not None and time.monotonic() - seen[0] < reuse_seconds:
            return TreeState(branch=branch, head=head, working_tree=seen[1])
        working = _working(root, deadline)
        if len(_STATUS_SEEN) > 64:
            _STATUS_SEEN.clear()
        if working != "unknown":
            _STATUS_SEEN[key] = (time.monotonic(), working)
    return TreeState(branch=branch, head=head, working_tree=working)


# What a start asks git of the working tree, and what a close lists: tracked changes, the layer's own files apart.
START_STATUS = ("status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude).ai")
CHANGED_FILES = ("status", "--porcelain", "--", ".", ":(exclude).ai")


def _working(root: str | Path, deadline: float | None) -> str:
    status = git(root, *START_STATUS, deadline=deadline)
    return "unknown" if status is None else ("dirty" if status else "clean")


def is_live_majordomus(pid: object) -> bool:
    """A pid names a live majordomus process (a reused pid of another program does not count)."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        cmdline = _read_bytes(f"/proc/{pid}/cmdline")
    except OSError:
        return True  # no /proc to ask: trust the signal
    return b"majordomus" in cmdline


def _read_bytes(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()


def owner() -> str:
    return os.environ.get("USER") or os.environ.get("LOGNAME") or str(os.getuid())


# Programs that only pass a command on: the client that ran a hook (or spawned a stdio server) is the nearest
# ancestor that is none of these. `sh -c` is how every client we know runs a hook command.
PASS_THROUGH = frozenset({"sh", "bash", "dash", "zsh", "fish", "ksh", "mksh", "ash", "busybox", "env", "nohup",
                          "nice", "timeout", "stdbuf", "setsid", "time", "xargs", "sudo", "script"})


def _stat(pid: int) -> tuple[str, int, str] | None:
    """(command name, parent pid, start time in clock ticks since boot) of a live process, from /proc."""
    try:
        text = _read_bytes(f"/proc/{pid}/stat").decode("utf-8", "replace")
    except OSError:
        return None
    left, right = text.find("("), text.rfind(")")  # the name may hold spaces and parentheses itself
    fields = text[right + 2:].split()
    if left < 0 or right < left or len(fields) < 20 or not fields[1].isdigit():
        return None
    return text[left + 1:right], int(fields[1]), fields[19]


def client_process(pid: int | None = None) -> str | None:
    """`<pid>@<start ticks>` of the process that ran this one: the parent of `pid` (this process by default),
    past any shell or wrapper in between. None where /proc cannot say (not Linux), or at init (pid 1).

    The start time makes the name unique for the life of the machine: a reused pid is another process."""
    current = os.getpid() if pid is None else pid
    for _ in range(16):
        here = _stat(current)
        if here is None or here[1] <= 1:
            return None
        parent = _stat(here[1])
        if parent is None:
            return None
        if parent[0] not in PASS_THROUGH:
            return f"{here[1]}@{parent[2]}"
        current = here[1]
    return None


def process_namespace() -> str | None:
    """Where a pid means something: this boot (`/proc/sys/kernel/random/boot_id`) and this pid namespace
    (`/proc/self/ns/pid`). A pid read in another container, on another machine sharing the repository, or
    before a reboot names nothing here; None where /proc cannot say."""
    try:
        boot = _read_bytes("/proc/sys/kernel/random/boot_id").decode("ascii", "replace").strip()
        space = os.readlink("/proc/self/ns/pid")
    except OSError:
        return None
    return f"{boot}/{space}" if boot and space else None


def process_gone(evidence: str) -> str | None:
    """Why the process named `<pid>@<start ticks>` is no longer running, as a sentence; None while it runs
    (stopped with SIGSTOP counts as running), or when nothing can be said for sure (a malformed name, a
    process of another user whose start cannot be read)."""
    pid_text, _, ticks = evidence.partition("@")
    if not pid_text.isdigit() or not ticks.isdigit() or int(pid_text) <= 1:
        return None
    pid = int(pid_text)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return f"the client process {pid} (started at tick {ticks}) is gone"
    except PermissionError:
        pass  # a live process of another user: its start below says whether it is still ours
    except OSError:
        return None
    try:
        text = _read_bytes(f"/proc/{pid}/stat").decode("utf-8", "replace")
    except FileNotFoundError:
        return f"the client process {pid} (started at tick {ticks}) is gone"
    except OSError:
        return None
    fields = text[text.rfind(")") + 2:].split()
    if len(fields) < 20:
        return None
    if fields[19] != ticks:
        return (f"the client process {pid} (started at tick {ticks}) is gone; pid {pid} now names another "
                f"process, started at tick {fields[19]}")
    if fields[0] in ("Z", "X"):
        return f"the client process {pid} (started at tick {ticks}) has exited"
    return None
