"""What each endpoint accepted: `.ai/local/state/otlp-cursor.json` (0600, replaced atomically).

Per endpoint, the ids of the episodes and the keys of the prompt records whose batch the endpoint answered with
success. Written only after such an answer, so a refused or interrupted batch is sent again next time and
nothing accepted is sent twice by this checkout. A set rather than a time: records pulled from another clone
carry older times than what was already sent. The lock is held for a whole export, so a CLI run and the
shared server's background export never send the same record at once.
"""

from __future__ import annotations

import json

from majordomus.layout import Layout, file_lock, refuse_symlink, write_atomic

SCHEMA = "majordomus.otlp-cursor/v1"


def path_of(layout: Layout):  # type: ignore[no-untyped-def]
    return layout.state / "otlp-cursor.json"


def lock(layout: Layout) -> file_lock:
    return file_lock(layout.locks / "otlp-export.lock")


class Cursor:
    def __init__(self, layout: Layout, endpoint: str) -> None:
        self.layout = layout
        self.endpoint = endpoint
        self.all: dict[str, dict[str, list[str]]] = {}
        path = path_of(layout)
        refuse_symlink(path)
        try:
            data = json.loads(path.read_bytes())
        except FileNotFoundError:
            data = {}
        except ValueError:
            data = {}  # a torn or edited cursor: everything is sent again (ids are deterministic)
        found = data.get("endpoints") if isinstance(data, dict) else None
        if isinstance(found, dict):
            self.all = {k: v for k, v in found.items() if isinstance(v, dict)}
        mine = self.all.get(endpoint, {})
        self.episodes: set[str] = {x for x in mine.get("episodes", []) if isinstance(x, str)}
        self.prompts: set[str] = {x for x in mine.get("prompts", []) if isinstance(x, str)}

    def save(self) -> None:
        self.all[self.endpoint] = {"episodes": sorted(self.episodes), "prompts": sorted(self.prompts)}
        data = json.dumps({"schema": SCHEMA, "endpoints": self.all}, separators=(",", ":"))
        write_atomic(path_of(self.layout), data.encode("utf-8"))
