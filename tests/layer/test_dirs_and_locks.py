"""A boundary asks the disk less (85 system calls for a server's attach, now 65) and still
refuses and repairs what it did.

- `ensure_dir` of a directory that is there, not a link and 0700 is one lstat (it was lstat, mkdir, lstat, stat);
- `file_lock` opens its file first and makes the locks directory only when the open says it is missing;
- the server's capture no longer checks the layer twice; the worktree's git layout is kept for a second, and the
  origin's URL while the config's stat is unchanged.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from majordomus.errors import RefusedError
from majordomus.identity import repository_id
from majordomus.layout import PRIVATE_DIR, ensure_dir, file_lock
from mcp_support import McpProcess, attach_one, auth, initialize, open_file


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_ensure_dir_creates_repairs_and_refuses(tmp_path: Path) -> None:
    """1. a missing directory under umask 0; 2. one of mode 0755; 3. a symlink to a directory; 4. one that is
    right already. Result: created 0700; repaired to 0700; refused, its target untouched; left as it is."""
    old = os.umask(0)
    try:
        ensure_dir(tmp_path / "new" / "deeper")
    finally:
        os.umask(old)
    assert mode(tmp_path / "new" / "deeper") == PRIVATE_DIR

    wide = tmp_path / "wide"
    wide.mkdir(mode=0o755)
    wide.chmod(0o755)
    ensure_dir(wide)
    assert mode(wide) == PRIVATE_DIR

    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    link = tmp_path / "linked"
    link.symlink_to(target)
    with pytest.raises(RefusedError):
        ensure_dir(link)
    assert link.is_symlink() and mode(target) == 0o700

    right = tmp_path / "right"
    right.mkdir(mode=0o700)
    before = right.lstat()
    ensure_dir(right)
    assert right.lstat().st_ino == before.st_ino and mode(right) == PRIVATE_DIR


def test_a_lock_makes_its_missing_directory_and_reuses_its_file(tmp_path: Path) -> None:
    """1. a lock whose directory is missing; 2. the same lock again. Result: the directory is made and the
    lock taken; the second time the same file is opened (no new inode)."""
    lock = tmp_path / "locks" / "a.lock"
    with file_lock(lock):
        assert lock.is_file()
        first = lock.stat().st_ino
    with file_lock(lock):
        assert lock.stat().st_ino == first


def test_the_repository_id_follows_the_origin_within_the_same_second(git_repo: Path) -> None:
    """1. no origin; 2. an origin added; 3. its URL changed to another of the same length; 4. removed; all
    within a second. Result: each repository id says what the config says at that moment."""
    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(git_repo), *args], check=True)

    assert repository_id(git_repo).startswith("local:")
    git("remote", "add", "origin", "https://example.invalid/aa.git")
    assert repository_id(git_repo) == "https://example.invalid/aa.git"
    git("remote", "set-url", "origin", "https://example.invalid/bb.git")
    assert repository_id(git_repo) == "https://example.invalid/bb.git"
    git("remote", "remove", "origin")
    assert repository_id(git_repo).startswith("local:")


def test_a_server_attach_remakes_a_removed_locks_directory_and_a_widened_one(initialised_repo: Path) -> None:
    """1. a shared server, one attach; 2. the locks directory removed and `sessions-open` widened to 0755
    while it runs; 3. a second attach. Result: both open; the locks directory is back, 0700, and
    `sessions-open` is 0700 again."""
    state = initialised_repo / ".ai/local/state"
    with McpProcess(initialised_repo, "--http-port", "0") as proc:
        url = proc.url()
        proc.request(initialize("owner"))
        owner = auth(initialised_repo)
        assert " opened at " in attach_one(url, owner, 0)
        shutil.rmtree(state / "locks")
        (state / "sessions-open").chmod(0o755)
        assert " opened at " in attach_one(url, owner, 1)
        assert open_file(initialised_repo, "thread-1") is not None
        proc.kill()
    assert mode(state / "locks") == PRIVATE_DIR
    assert mode(state / "sessions-open") == PRIVATE_DIR
