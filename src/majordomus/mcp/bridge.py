"""A later process's stdio relayed to the shared server: each frame one `POST /mcp`.

The bridge marks its requests `X-Majordomus-Bridge: 1`, so the server keeps one connection for it
with stdio semantics (the process is the peer, whatever era its client speaks) and names it in
`Mcp-Session-Id`; `X-Majordomus-Client` names the client process that spawned this one (`<pid>@<start
ticks>`), the evidence that ties an attach to the client's hook episode (SPEC §4.3). Every request
carries the owner's token from the lease (`Authorization: Bearer …`).
Stdlib only (http.client), so a bridging process starts fast.
"""

from __future__ import annotations

import http.client
import os
import threading
from urllib.parse import urlsplit

from majordomus.identity import client_process


class ServerGone(Exception):
    """The shared server does not answer (or is stopping): elect again."""


class SessionLost(Exception):
    """The server answered 404 for our session (it expired): initialise again and replay."""


class Bridge:
    def __init__(self, url: str, token: str, timeout: float = 60.0) -> None:
        parts = urlsplit(url)
        self.url = url
        self._auth = f"Bearer {token}"
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self.timeout = timeout
        self.session_id: str | None = None
        self._conn: http.client.HTTPConnection | None = None
        self._lock = threading.Lock()
        self.client = client_process()

    def _request(self, method: str, body: bytes | None, replay: bool = False) -> tuple[int, bytes, str | None]:
        headers = {"X-Majordomus-Bridge": "1", "X-Majordomus-Bridge-Pid": str(os.getpid()),
                   "Accept": "application/json, text/event-stream",
                   "Authorization": self._auth,
                   "Host": f"127.0.0.1:{self.port}" if self.host.startswith("127.") else f"localhost:{self.port}"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        if self.client is not None:
            headers["X-Majordomus-Client"] = self.client
        if replay:
            headers["X-Majordomus-Replay"] = "1"
        if self.session_id:
            headers["Mcp-Session-Id"] = self.session_id
        for attempt in (1, 2):  # a kept-alive connection the server closed fails once: reconnect and retry
            try:
                if self._conn is None:
                    self._conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
                self._conn.request(method, "/mcp", body=body, headers=headers)
                response = self._conn.getresponse()
                data = response.read()
                return response.status, data, response.getheader("mcp-session-id")
            except (OSError, http.client.HTTPException):
                if self._conn is not None:
                    self._conn.close()
                self._conn = None
                if attempt == 2:
                    raise ServerGone(self.url) from None
        raise ServerGone(self.url)  # pragma: no cover

    def send(self, frame: bytes, *, replay: bool = False) -> bytes | None:
        """Relay one frame (`replay`: its client's own frame again, after failover); its answer frame, or None
        for a notification."""
        with self._lock:
            status, data, session = self._request("POST", frame, replay)
            if status in (503, 401):  # stopping, or another server now answers here with its own token
                raise ServerGone(self.url)
            if status == 404 and self.session_id:
                self.session_id = None
                raise SessionLost(self.url)
            if session:
                self.session_id = session
            if status == 202 or not data.strip():
                return None
            return data.strip()

    def keepalive(self) -> None:
        """An empty notification: keeps the session (and so the peer) from the idle expiry."""
        if self.session_id is not None:
            self.send(b'{"jsonrpc":"2.0","method":"notifications/majordomus/keepalive"}')

    def close(self) -> None:
        """The client's EOF: end the session (the server detaches the episode; it is not closed)."""
        with self._lock:
            if self.session_id is not None:
                try:
                    self._request("DELETE", None)
                except ServerGone:
                    pass
                self.session_id = None
            if self._conn is not None:
                self._conn.close()
                self._conn = None
