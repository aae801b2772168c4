"""Only the repository's owner gets into its shared server.

Loopback is reachable by every local user: `nobody` could list, attach and detach another user's episodes,
and a detach writes a tracked record saying `closed`. SPEC §8: every request but `/api/v1/live` carries the
repository's token (`Authorization: Bearer …`, 401 without it); it lives only in the 0600 lease.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from mcp_support import LEASE, McpProcess, call, initialize, open_file, token

JSON = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
SESSIONS = ".ai/repo/sessions"


def records(repo: Path) -> list[Path]:
    return sorted((repo / SESSIONS).glob("2*.md")) if (repo / SESSIONS).is_dir() else []


def assert_unauthorized(response: httpx.Response) -> None:
    assert response.status_code == 401, (response.status_code, response.text)
    assert response.headers["content-type"].startswith("application/json")
    assert response.headers["www-authenticate"].startswith("Bearer")
    error = response.json()["error"]
    assert error["code"] == "unauthorized"
    assert LEASE in error["message"] and "Authorization: Bearer" in error["message"]


def test_the_token_is_long_random_private_and_never_logged(initialised_repo: Path) -> None:
    """1. a shared server starts. Result: the lease is 0600 in a 0700 directory and holds a token of at least
    32 random bytes; no log line carries it; a second server's token differs."""
    seen = []
    for _ in range(2):
        with McpProcess(initialised_repo, "--http-port", "0") as proc:
            proc.url()
            lease = initialised_repo / LEASE
            assert stat.S_IMODE(lease.stat().st_mode) == 0o600
            assert stat.S_IMODE(lease.parent.stat().st_mode) == 0o700
            secret = token(initialised_repo)
            assert len(secret) >= 43  # secrets.token_urlsafe(32)
            proc.request(initialize("owner"))
            proc.close_stdin()
            assert proc.wait() == 0
            assert secret not in proc.stderr and secret[:12] not in proc.stderr
            seen.append(secret)
    assert seen[0] != seen[1]
    tracked = subprocess.run(["git", "-C", str(initialised_repo), "grep", "-I", "-l", "-e", seen[1]],
                             capture_output=True)
    assert tracked.returncode == 1, tracked.stderr  # in no tracked file (-e: a token may begin with "-")


def test_without_the_token_nothing_but_live_answers(initialised_repo: Path) -> None:
    """1. a shared server holding an episode attached by its own client; 2. another local user (no token, a
    wrong one, a forged one of the right length, another scheme) lists, opens an MCP session, detaches.
    Result: 401 with a JSON sentence naming where the token lives, for every route but /api/v1/live; the
    episode stays open and no record is written; with the token the same requests work."""
    with McpProcess(initialised_repo, "--http-port", "0") as proc:
        url = proc.url()
        proc.request(initialize("owner"))
        attached = proc.request(call(2, "majordomus_session_attach", {"external_id": "owner-thread"}))
        assert attached["result"]["isError"] is False
        secret = token(initialised_repo)
        forged = "A" * len(secret)
        wrong_headers: list[dict[str, str]] = [{}, {"Authorization": f"Bearer {forged}"},
                                               {"Authorization": f"Bearer {secret[:-1]}"},
                                               {"Authorization": f"Basic {secret}"},
                                               {"Authorization": secret}, {"Authorization": "Bearer"},
                                               {"Authorization": f"Bearer {secret}, Bearer {secret}"}]
        with httpx.Client(base_url=url, timeout=10) as client:
            for headers in wrong_headers:
                assert_unauthorized(client.get("/api/v1/episodes", headers=headers))
                assert_unauthorized(client.get("/api/v1/peers", headers=headers))
                assert_unauthorized(client.post("/api/v1/episodes/detach", json={"external_id": "owner-thread"},
                                                headers=headers))
                assert_unauthorized(client.post("/api/v1/episodes/attach", json={"external_id": "x"},
                                                headers=headers))
                assert_unauthorized(client.post("/mcp", json=initialize("intruder"), headers={**JSON, **headers}))
                assert_unauthorized(client.delete("/mcp", headers={"Mcp-Session-Id": "x", **headers}))
                for path in ("/", "/openapi.json", "/swagger", "/api/v1/ready", "/mcp"):
                    assert_unauthorized(client.get(path, headers=headers))
            live = client.get("/api/v1/live")
            assert live.status_code == 200 and live.json()["live"] is True
            assert secret not in live.text
            assert open_file(initialised_repo, "owner-thread")["held_by"]  # type: ignore[index]
            assert records(initialised_repo) == []
            owner = {"Authorization": f"Bearer {secret}"}
            listing = client.get("/api/v1/episodes", headers=owner)
            assert listing.status_code == 200 and listing.json()["open"] == 1
            session = client.post("/mcp", json=initialize("owner-http"), headers={**JSON, **owner})
            assert session.status_code == 200 and session.headers["mcp-session-id"]
            assert client.delete("/mcp", headers={"Mcp-Session-Id": session.headers["mcp-session-id"],
                                                  **owner}).status_code == 204
        proc.close_stdin()
        assert proc.wait() == 0


def test_a_bridged_client_carries_the_token_and_keeps_working(initialised_repo: Path) -> None:
    """1. a shared server; 2. a second majordomus-mcp bridges to it and attaches, lists, detaches.
    Result: every frame reaches the server (the bridge reads the token from the lease), the detach closes."""
    with McpProcess(initialised_repo, "--http-port", "0") as server:
        server.url()
        server.request(initialize("owner"))
        with McpProcess(initialised_repo, "--http-port", "0") as bridged:
            assert "You are peer p2" in bridged.request(initialize("bridged"))["result"]["instructions"]
            bridged.wait_stderr("bridging this stdio session to it")
            attach = bridged.request(call(2, "majordomus_session_attach", {"external_id": "bridged-thread"}))
            assert attach["result"]["isError"] is False, attach
            closed = bridged.request(call(3, "majordomus_session_detach", {}))
            assert closed["result"]["structuredContent"]["episode"]["repository"].startswith("episode closed")
            bridged.close_stdin()
            assert bridged.wait() == 0
        server.close_stdin()
        assert server.wait() == 0
    assert len(records(initialised_repo)) == 1


NOBODY = shutil.which("setpriv")
SYSTEM_PYTHON = shutil.which("python3", path="/usr/bin:/bin") or sys.executable


@pytest.mark.skipif(os.geteuid() != 0 or NOBODY is None, reason="needs root and setpriv to act as nobody")
def test_nobody_can_neither_read_the_token_nor_detach(initialised_repo: Path, tmp_path: Path) -> None:
    """1. the owner's shared server holds an attached episode; 2. a process running as `nobody` (setpriv) tries to
    read the lease, then to list and detach over loopback with no token and with a forged one.
    Result: the lease cannot be read (permission denied, even with every directory above it opened to all);
    every request is 401; the episode stays open and no record is written."""
    with McpProcess(initialised_repo, "--http-port", "0") as proc:
        url = proc.url()
        proc.request(initialize("owner"))
        proc.request(call(2, "majordomus_session_attach", {"external_id": "owner-thread"}))
        lease = initialised_repo / LEASE
        # open every directory on the way for traversal: only the file's own mode and .ai/local's guard it
        opened: list[tuple[Path, int]] = []
        base = next(p for p in tmp_path.parents if p.name.startswith("pytest-of-"))
        for parent in [*reversed(lease.parents)]:
            if not parent.is_relative_to(base):
                continue
            opened.append((parent, stat.S_IMODE(parent.stat().st_mode)))
            parent.chmod(opened[-1][1] | 0o011)
        try:
            as_nobody = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"]
            read = subprocess.run([*as_nobody, "cat", str(lease)], capture_output=True, text=True, timeout=20)
            assert read.returncode != 0 and "Permission denied" in read.stderr
            assert token(initialised_repo) not in read.stdout
            script = tmp_path / "nobody_client.py"
            script.write_text(NOBODY_CLIENT)
            script.chmod(0o644)
            tried = subprocess.run([*as_nobody, SYSTEM_PYTHON, "-I", str(script), url, token(initialised_repo)[:4]],
                                   capture_output=True, text=True, timeout=60)
        finally:
            for parent, mode in reversed(opened):
                parent.chmod(mode)
        assert tried.returncode == 0, tried.stderr
        statuses = json.loads(tried.stdout)
        assert statuses == {"list": 401, "detach": 401, "forged-detach": 401, "initialize": 401, "live": 200}
        assert open_file(initialised_repo, "owner-thread")["held_by"]  # type: ignore[index]
        assert records(initialised_repo) == []
        proc.close_stdin()
        proc.kill()


NOBODY_CLIENT = r'''
import http.client, json, sys
from urllib.parse import urlsplit
parts = urlsplit(sys.argv[1])
def ask(method, path, body=None, headers=None):
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    h = {"Host": parts.netloc, "Content-Type": "application/json", **(headers or {})}
    conn.request(method, path, body=json.dumps(body).encode() if body is not None else None, headers=h)
    status = conn.getresponse().status
    conn.close()
    return status
forged = {"Authorization": "Bearer " + sys.argv[2] + "x" * 39}
print(json.dumps({
    "list": ask("GET", "/api/v1/episodes"),
    "detach": ask("POST", "/api/v1/episodes/detach", {"external_id": "owner-thread"}),
    "forged-detach": ask("POST", "/api/v1/episodes/detach", {"external_id": "owner-thread"}, forged),
    "initialize": ask("POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "nobody", "version": "0"}}}),
    "live": ask("GET", "/api/v1/live"),
}))
'''
