"""Helpers for the MCP tests: the real `majordomus-mcp` as a subprocess, JSON-RPC frames, waiting with deadlines."""

from __future__ import annotations

import json
import os
import queue
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BIN_DIR = Path(sys.executable).parent
MAJORDOMUS_MCP = BIN_DIR / "majordomus-mcp"
OPEN = ".ai/local/state/sessions-open"
LEASE = ".ai/local/state/mcp/server.json"
URL = re.compile(r"listening on (http://127\.0\.0\.1:\d+)")


def token(repo: Path) -> str:
    """The owner's token of the repository's shared server: it lives only in the 0600 lease."""
    return str(json.loads((repo / LEASE).read_text())["token"])


def auth(repo: Path) -> dict[str, str]:
    """The header every HTTP request but `/api/v1/live` must carry (SPEC §8)."""
    return {"Authorization": f"Bearer {token(repo)}"}


def initialize(name: str = "test-client", version: str = "2025-06-18", request_id: int = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "initialize",
            "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": name, "version": "0"}}}


INITIALIZED: dict[str, Any] = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def call(request_id: int, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments if arguments is not None else {}}}


def modern(request_id: int, method: str, params: dict[str, Any] | None = None,
           version: str = "2026-07-28", client: str = "modern-client") -> dict[str, Any]:
    meta = {"io.modelcontextprotocol/protocolVersion": version, "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": client, "version": "1"}}
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": {**(params or {}), "_meta": meta}}


HTTP_JSON = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def attach_one(url: str, owner: dict[str, str], i: int, external_id: str | None = None) -> str:
    """One HTTP session of a shared server: initialize, initialized, attach `thread-<i>` (or `external_id`);
    the attach's `repository` sentence."""
    import httpx

    with httpx.Client(base_url=url, timeout=30, headers=owner) as client:
        response = client.post("/mcp", json=initialize(f"peer-{i}", "2025-11-25"), headers=HTTP_JSON)
        sid = response.headers["mcp-session-id"]
        headers = {**HTTP_JSON, "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
        client.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
        named = external_id if external_id is not None else f"thread-{i}"
        answer = client.post("/mcp", json=call(2, "majordomus_session_attach", {"external_id": named}),
                             headers=headers).json()
        return str(answer["result"]["structuredContent"]["episode"]["repository"])


def frames(*messages: dict[str, Any]) -> bytes:
    return b"".join(json.dumps(m).encode() + b"\n" for m in messages)


def wait_for(condition: Callable[[], Any], timeout: float = 10.0, what: str = "a condition") -> Any:
    """Poll `condition` until it returns something truthy; fail with `what` after the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)


def fingerprint(repo: Path) -> tuple[str, str]:
    """`git status --porcelain` and the index: serving must change neither."""
    status = subprocess.run(["git", "-C", str(repo), "status", "--porcelain"], capture_output=True, text=True).stdout
    index = subprocess.run(["git", "-C", str(repo), "ls-files", "-s"], capture_output=True, text=True).stdout
    return status, index


def run_mcp(repo: Path, messages: list[dict[str, Any]], *args: str, env: dict[str, str] | None = None,
            timeout: float = 30) -> tuple[int, list[dict[str, Any]], str]:
    """One client: the frames on stdin, then EOF. Exit code, the stdout frames (each must be JSON), stderr."""
    done = subprocess.run([str(MAJORDOMUS_MCP), *args], cwd=repo, input=frames(*messages), capture_output=True,
                          timeout=timeout, env={**os.environ, **(env or {})})
    lines = done.stdout.decode().splitlines()
    return done.returncode, [json.loads(line) for line in lines], done.stderr.decode()


def front_matter(path: Path) -> dict[str, Any]:
    import yaml

    text = path.read_text(encoding="utf-8")
    return yaml.safe_load(text[4: text.index("\n---", 4)])


def open_file(repo: Path, external_id: str) -> dict[str, Any] | None:
    """The open-episode file of a connection episode, read with a real YAML parser (None when absent)."""
    import yaml

    from majordomus.identity import session_key

    path = repo / OPEN / f"{session_key(external_id)}.yaml"
    return yaml.safe_load(path.read_text()) if path.exists() else None


def structured(frame: dict[str, Any]) -> dict[str, Any]:
    assert "result" in frame, frame
    assert frame["result"]["isError"] is False, frame
    return frame["result"]["structuredContent"]


class McpProcess:
    """A long-lived `majordomus-mcp` whose stdin we hold: send frames, read answers by id, watch stderr."""

    def __init__(self, repo: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.repo = repo
        self.proc = subprocess.Popen([str(MAJORDOMUS_MCP), *args], cwd=repo, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env={**os.environ, **(env or {})})
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.raw_lines: list[bytes] = []
        self._stderr: list[str] = []
        self._pending: dict[Any, dict[str, Any]] = {}
        threading.Thread(target=self._pump_out, daemon=True).start()
        threading.Thread(target=self._pump_err, daemon=True).start()

    def _pump_out(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.raw_lines.append(line)
            self.lines.put(line)

    def _pump_err(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._stderr.append(line.decode(errors="replace"))

    @property
    def stderr(self) -> str:
        return "".join(self._stderr)

    def wait_stderr(self, text: str, timeout: float = 15.0) -> str:
        wait_for(lambda: text in self.stderr, timeout, f"{text!r} on stderr; got:\n{self.stderr}")
        return self.stderr

    def url(self) -> str:
        self.wait_stderr("listening on http://")
        match = URL.search(self.stderr)
        assert match, self.stderr
        return match.group(1)

    def auth(self) -> dict[str, str]:
        """The owner's token header for the shared server this process serves (or bridges to)."""
        self.url()
        return auth(self.repo)

    def send(self, *messages: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(frames(*messages))
        self.proc.stdin.flush()

    def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def next_frame(self, timeout: float = 15.0) -> dict[str, Any]:
        line = self.lines.get(timeout=timeout)
        return json.loads(line)

    def answer(self, request_id: Any, timeout: float = 15.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while request_id not in self._pending:
            frame = self.next_frame(max(0.01, deadline - time.monotonic()))
            self._pending[frame.get("id")] = frame
        return self._pending.pop(request_id)

    def request(self, message: dict[str, Any], timeout: float = 15.0) -> dict[str, Any]:
        self.send(message)
        return self.answer(message["id"], timeout)

    def close_stdin(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()

    def wait(self, timeout: float = 20.0) -> int:
        return self.proc.wait(timeout=timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def __enter__(self) -> McpProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()


def set_policy(repo: Path, **values: int) -> None:
    """Override policy keys given as section__key=value (e.g. episodes__stateless_ttl_seconds=1)."""
    import yaml

    path = repo / ".ai/repo/policy.yaml"
    data = yaml.safe_load(path.read_text()) or {}
    for dotted, value in values.items():
        section, key = dotted.split("__", 1)
        data.setdefault(section, {})[key] = value
    path.write_text(yaml.safe_dump(data))


MODERN_HEADERS_VERSION = "2026-07-28"


def modern_headers(message: dict[str, Any]) -> dict[str, str]:
    """The routing headers a 2026-07-28 client sends with a POST /mcp."""
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": message["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
               "Mcp-Method": message["method"]}
    if message["method"] == "tools/call":
        headers["Mcp-Name"] = message["params"]["name"]
    return headers


class TokenProxy:
    """A loopback relay that adds the owner's token to every request: for a client we did not write that has no way
    to send a header (the Inspector CLI 0.15). `with TokenProxy(url, auth(repo)) as proxy_url: …`."""

    def __init__(self, target: str, headers: dict[str, str]) -> None:
        import http.client
        import http.server
        from urllib.parse import urlsplit

        parts = urlsplit(target)
        extra = headers

        class Relay(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _relay(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                sent = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")}
                for key, value in list(sent.items()):  # a reverse proxy: its own origin stands for the target's
                    if key.lower() == "origin" and value.rstrip("/") in proxy_origins:
                        sent[key] = f"{parts.scheme}://{parts.netloc}"
                conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=60)
                try:
                    conn.request(self.command, self.path, body=body, headers={**sent, **extra})
                    answer = conn.getresponse()
                    data = answer.read()
                finally:
                    conn.close()
                self.send_response(answer.status)
                for key, value in answer.getheaders():
                    if key.lower() not in ("content-length", "transfer-encoding", "connection", "date", "server"):
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_DELETE = _relay  # noqa: N815 - the names http.server calls

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
                pass

        proxy_origins: set[str] = set()
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Relay)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        proxy_origins.update({self.url, f"http://localhost:{self.server.server_address[1]}"})

    def __enter__(self) -> str:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self.url

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
