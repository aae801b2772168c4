"""What each endpoint accepted: `.ai/local/state/otlp-cursor.json` (0600, replaced atomically).

Per signal URL (its traces URL for the episodes, its logs URL for the prompts), the keys of what that URL
answered with success: episode ids, prompt keys. Written only after such an answer, so a refused or
interrupted batch is sent again next time and nothing accepted is sent twice by this checkout. A set rather
than a time: records pulled from another clone carry older times than what was already sent. The lock is held
for a whole export, so two exports of one checkout never send the same record at once.

A URL is kept without its user information, query or fragment (`shown`): no credential is ever written here.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from majordomus.layout import Layout, file_lock, refuse_symlink, write_atomic

SCHEMA = "majordomus.otlp-cursor/v1"


def path_of(layout: Layout) -> Path:
    return layout.state / "otlp-cursor.json"


def lock(layout: Layout) -> file_lock:
    return file_lock(layout.locks / "otlp-export.lock")


def shown(url: str) -> str:
    """`https://user:secret@host:4318/v1/traces?k=v` → `https://host:4318/v1/traces`: what a message or the
    cursor may say of a URL."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = host if port is None else f"{host}:{port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


class Cursor:
    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self.sent: dict[str, set[str]] = {}
        path = path_of(layout)
        refuse_symlink(path)
        try:
            data = json.loads(path.read_bytes())
        except FileNotFoundError:
            data = {}
        except ValueError:
            data = {}  # a torn or edited cursor: everything is sent again (the ids are deterministic)
        found = data.get("accepted") if isinstance(data, dict) else None
        if isinstance(found, dict):
            for url, keys in found.items():
                if isinstance(url, str) and isinstance(keys, list):
                    self.sent[url] = {k for k in keys if isinstance(k, str)}

    def accepted(self, url: str) -> set[str]:
        """The keys `url` accepted (a live set: `add` to it, then `save`)."""
        return self.sent.setdefault(shown(url), set())

    def save(self) -> None:
        data = {"schema": SCHEMA, "accepted": {url: sorted(keys) for url, keys in sorted(self.sent.items())}}
        write_atomic(path_of(self.layout), json.dumps(data, separators=(",", ":")).encode("utf-8"))
