"""The lease `.ai/local/state/mcp/server.json`: one shared server per repository.

The first process to create the file atomically is the server; a later one probes the URL it
names and bridges to it. A stale, corrupt, empty or abandoned lease is taken over, and the log
says which. The same `release` removes it at a normal stop and in the signal path.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import json
import os
import secrets
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from majordomus import __version__
from majordomus.identity import is_live_majordomus, now_utc, rfc3339
from majordomus.layout import Layout, create_exclusive, ensure_dir, file_lock, write_atomic

SCHEMA = "majordomus-mcp-lease/v1"
BIND_GRACE_SECONDS = 15.0  # a lease with no URL yet: its server is still binding
PROBE_TIMEOUT_SECONDS = 2.0
TOKEN_BYTES = 32

Log = Callable[[str], None]


@dataclass(frozen=True)
class Lease:
    pid: int
    token: str
    root: str
    url: str | None
    started_at: str
    executable: dict[str, Any]
    version: str = __version__
    schema: str = SCHEMA

    def to_bytes(self) -> bytes:
        fields = asdict(self)
        ordered = {key: fields[key] for key in ("schema", "pid", "token", "root", "url", "started_at",
                                                "executable", "version")}
        return (json.dumps(ordered, indent=2) + "\n").encode()

    @property
    def digest(self) -> str:
        """What /api/v1/live shows of the token: proves the answering server wrote this lease."""
        return token_digest(self.token)


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Claimed:
    """This process is the server; `took_over` names the problem with the lease it replaced."""

    lease: Lease
    took_over: str | None = None


@dataclass(frozen=True)
class Joined:
    """A live server holds the lease: bridge to `lease.url`."""

    lease: Lease


def _executable() -> dict[str, Any]:
    path = Path(sys.argv[0]) if sys.argv and sys.argv[0] else Path(sys.executable)
    try:
        st = path.stat()
        return {"path": str(path.resolve()), "mtime": int(st.st_mtime), "size": st.st_size}
    except OSError:
        return {"path": str(path), "mtime": None, "size": None}


def new_token() -> str:
    """The owner's token: 32 random bytes, URL-safe. Every HTTP request but `/api/v1/live` must carry it, and it
    lives only in this 0600 lease (SPEC §8): another local user can reach loopback but cannot read it. Each
    elected server mints its own, so a token sent to a port a dead server left behind opens nothing."""
    return secrets.token_urlsafe(TOKEN_BYTES)


def new_lease(root: Path) -> Lease:
    return Lease(pid=os.getpid(), token=new_token(), root=str(root), url=None,
                 started_at=rfc3339(now_utc()), executable=_executable())


def parse_lease(raw: bytes) -> Lease | str:
    """The lease, or the word for what is wrong with it: `empty lease` or `corrupt lease`."""
    if not raw.strip():
        return "empty lease"
    try:
        data = json.loads(raw)
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            return "corrupt lease"
        pid, token, url = data["pid"], data["token"], data.get("url")
        if not isinstance(pid, int) or isinstance(pid, bool) or not isinstance(token, str):
            return "corrupt lease"
        if url is not None and not (isinstance(url, str) and url.startswith("http://")):
            return "corrupt lease"
        return Lease(pid=pid, token=token, root=str(data.get("root", "")), url=url,
                     started_at=str(data.get("started_at", "")), executable=data.get("executable") or {},
                     version=str(data.get("version", "")))
    except (ValueError, KeyError, UnicodeDecodeError):
        return "corrupt lease"


def probe(lease: Lease, timeout: float = PROBE_TIMEOUT_SECONDS) -> bool:
    """Does the server at the lease's URL answer, and is it the one that wrote this lease?"""
    if lease.url is None:
        return False
    parts = urlsplit(lease.url)
    try:
        conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=timeout)
        try:
            # no token here: whatever answers on this port proves itself by the digest before it is sent one
            conn.request("GET", "/api/v1/live", headers={"Accept": "application/json"})
            response = conn.getresponse()
            body = json.loads(response.read() or b"{}")
        finally:
            conn.close()
    except (OSError, ValueError, http.client.HTTPException):
        return False
    return response.status == 200 and body.get("lease") == lease.digest and not body.get("stopping")


class LeaseFile:
    """Claim, publish and release the lease of one repository."""

    def __init__(self, layout: Layout, log: Log) -> None:
        self.layout = layout
        self.path = layout.lease_file
        self.log = log
        self.mine: Lease | None = None

    def _lock(self) -> contextlib.AbstractContextManager[None]:
        ensure_dir(self.layout.locks)
        return file_lock(self.layout.locks / "mcp-lease.lock")

    def _rel(self) -> str:
        try:
            return str(self.path.relative_to(self.layout.root))
        except ValueError:
            return str(self.path)

    def elect(self, bind_grace: float = BIND_GRACE_SECONDS) -> Claimed | Joined:
        """Create the lease or find a live server; take over whatever is stale, corrupt or empty."""
        ensure_dir(self.path.parent)
        took_over: str | None = None
        waiting_since: float | None = None
        while True:
            candidate = new_lease(self.layout.root)
            if create_exclusive(self.path, candidate.to_bytes()):
                self.mine = candidate
                return Claimed(candidate, took_over)
            try:
                raw = self.path.read_bytes()
            except FileNotFoundError:
                continue  # released between our two steps: try to create it again
            current = parse_lease(raw)
            if isinstance(current, str):
                took_over = self._take_over(raw, current, "it is not a lease this version can read"
                                            if current == "corrupt lease" else "the file is empty")
                continue
            if not is_live_majordomus(current.pid):
                took_over = self._take_over(raw, "stale lease", f"its server, pid {current.pid}, is gone")
                continue
            if current.url is None:
                waiting_since = waiting_since or time.monotonic()
                if time.monotonic() - waiting_since < bind_grace:
                    time.sleep(0.05)  # its server is binding the port right now
                    continue
                took_over = self._take_over(raw, "abandoned lease", f"pid {current.pid} never published a URL")
                continue
            if probe(current):
                return Joined(current)
            took_over = self._take_over(raw, "stale lease", f"nothing answers for it at {current.url}")

    def _take_over(self, raw: bytes, problem: str, why: str) -> str:
        """Remove the lease we read, only if it is still the same bytes (another process may have won)."""
        with self._lock():
            try:
                if self.path.read_bytes() == raw:
                    self.path.unlink()
                    self.log(f"{problem} {self._rel()} ({why}); taking it over")
            except FileNotFoundError:
                pass
        return problem

    def publish(self, url: str) -> None:
        """Write the URL into our lease once the port is bound."""
        assert self.mine is not None
        with self._lock():
            self.mine = replace(self.mine, url=url)
            write_atomic(self.path, self.mine.to_bytes())

    def release(self) -> None:
        """Remove the lease if it is still ours: at stop, and on SIGTERM, SIGINT or SIGHUP."""
        if self.mine is None:
            return
        with contextlib.suppress(OSError), self._lock():
            current = parse_lease(self.path.read_bytes())
            if isinstance(current, Lease) and current.token == self.mine.token:
                self.path.unlink()
        self.mine = None
