"""The install step's one rule: skip only when the npm registry cannot be reached, fail on anything else.

Both cases are made on 127.0.0.1 (npm pointed at a closed port, then at a registry that answers 404), so
these run without the network and without the real clients.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from real_clients.pinned import InstallFailed, RegistryUnreachable, ensure_installed


class NotFound(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        body = json.dumps({"error": "Not found"}).encode()
        self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass


@pytest.fixture
def registry_that_says_no() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), NotFound)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_registry_that_cannot_be_reached_is_the_reason_to_skip(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("npm_config_registry", f"http://127.0.0.1:{closed_port()}/")
    monkeypatch.setenv("npm_config_fetch_retries", "0")
    with pytest.raises(RegistryUnreachable, match="cannot be reached"):
        ensure_installed(tmp_path / "clients")
    assert list(tmp_path.glob("clients*")) == []  # no cache and no half-installed folder


def test_a_registry_that_answers_no_is_a_failure_not_a_skip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            registry_that_says_no: str) -> None:
    monkeypatch.setenv("npm_config_registry", registry_that_says_no)
    monkeypatch.setenv("npm_config_fetch_retries", "0")
    with pytest.raises(InstallFailed, match="failed"):
        ensure_installed(tmp_path / "clients")
    assert list(tmp_path.glob("clients*")) == []
