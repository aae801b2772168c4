"""Who and when: repository_id, worktree_id, episode ids, timestamps, the provider-session key.

Stdlib only: the hook path imports this. One function computes each identity; every writer uses it.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import subprocess
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from majordomus.errors import MissingError

GIT_TIMEOUT = 0.8  # seconds; a hook has 1-1.5 s in all (CLIENTS.md), git must not eat it


def now_utc() -> datetime:
    return datetime.now(timezone.utc).replace(microsecond=0)


def rfc3339(moment: datetime) -> str:
    """`2026-12-02T08:00:00Z`: UTC, to the second."""
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def compact_stamp(moment: datetime) -> str:
    """`20261202T080000Z`, for file names that sort by time."""
    return moment.astimezone(timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def parse_rfc3339(text: str) -> datetime | None:
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    except (TypeError, ValueError):
        return None


def new_episode_id(moment: datetime) -> str:
    """`s-YYYYMMDDHHMMSS-xxxx` (UTC, four random hex)."""
    return f"s-{moment.astimezone(timezone.utc).strftime('%Y%m%d%H%M%S')}-{secrets.token_hex(2)}"


_KEY_SAFE = re.compile(r"[A-Za-z0-9_-]")
_KEY_MAX = 180


def session_key(provider_session: str) -> str:
    """The one sanitizer from a provider session to a file-name key; every reader and writer uses it.

    Bytes outside `[A-Za-z0-9_-]` are percent-encoded (so `.` and `/` can never survive: no `..`, no
    separator), the empty string is `%`, and a key too long for a file name keeps its head and adds a
    `~` plus a digest of the whole (`~` is always encoded elsewhere, so distinct inputs stay distinct).
    """
    encoded = "".join(
        ch if _KEY_SAFE.fullmatch(ch) else "".join(f"%{b:02X}" for b in ch.encode("utf-8", "surrogatepass"))
        for ch in provider_session
    )
    if not encoded:
        return "%"
    if len(encoded) > _KEY_MAX:
        digest = hashlib.sha256(provider_session.encode("utf-8", "surrogatepass")).hexdigest()[:32]
        encoded = f"{encoded[:120]}~{digest}"
    return encoded


def name_key(text: str, limit: int = 64) -> str:
    """A readable fragment for a file name (a branch): `[A-Za-z0-9._-]`, never empty, never `..`."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.")[:limit]
    return cleaned or "none"


def git(root: Path, *args: str, timeout: float = GIT_TIMEOUT) -> str | None:
    """Run git in `root`; its stdout stripped, or None when it fails or takes too long."""
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, timeout=timeout,
                              check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    return done.stdout.decode("utf-8", "replace").strip()


def find_root(start: Path) -> Path:
    """The git top level of `start`; exit 12 outside a repository."""
    top = git(start, "rev-parse", "--show-toplevel", timeout=5)
    if not top:
        raise MissingError(f"{start} is not inside a git repository", "run majordomus inside one, or pass --repo ROOT")
    return Path(top)


def _strip_userinfo(url: str) -> str:
    """`https://user:token@host/x` must never put its token into a committed record."""
    return re.sub(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^/@]*@", r"\1", url)


def repository_id(root: Path) -> str:
    url = git(root, "config", "--get", "remote.origin.url")
    if url:
        return _strip_userinfo(url)
    common = git(root, "rev-parse", "--path-format=absolute", "--git-common-dir") or str(root / ".git")
    return "local:" + hashlib.sha256(common.encode()).hexdigest()[:16]


def worktree_id(root: Path) -> str:
    return hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class TreeState:
    branch: str
    head: str  # 40 hex, or NONE before the first commit
    working_tree: str  # clean | dirty | unknown


def tree_state(root: Path) -> TreeState:
    """Branch, head and cleanliness in two git calls, each bounded in time."""
    out = git(root, "rev-parse", "HEAD", "--abbrev-ref", "HEAD") or ""
    parts = out.splitlines()
    head = parts[0] if parts and re.fullmatch(r"[0-9a-f]{40}", parts[0]) else "NONE"
    branch = parts[1] if len(parts) > 1 else ""
    if not parts:  # an unborn branch: rev-parse HEAD fails as a whole
        branch = git(root, "symbolic-ref", "--short", "HEAD") or "HEAD"
    status = git(root, "status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude).ai")
    working = "unknown" if status is None else ("dirty" if status else "clean")
    return TreeState(branch=branch, head=head, working_tree=working)


def owner() -> str:
    return os.environ.get("USER") or os.environ.get("LOGNAME") or str(os.getuid())
