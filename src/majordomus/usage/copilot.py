"""Copilot CLI's session events: `$COPILOT_HOME/session-state/<session>/events.jsonl` (`~/.copilot` unless set),
one event a line with its `type`, `timestamp` and `data`; a resumed session appends to the same file.

Each model request is a `session.usage_record` event: `data.usage` holds `model`, `inputTokens` (the cached and
cache-written tokens inside it, as the chat completions API counts), `outputTokens` (reasoning inside it),
`cacheReadTokens`, `cacheWriteTokens`, and `apiCallId`, which names the request (a record written twice counts
once). The `session.shutdown` event's totals cover the whole session, every resume included, and are not used.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from majordomus.usage.tally import Tally, Tokens, Window, client_dir, count, json_lines, shown

TITLE = "Copilot CLI"


def home(env: Mapping[str, str]) -> Path:
    return client_dir(env, "COPILOT_HOME", ".copilot")


def where(env: Mapping[str, str]) -> str:
    return f"{shown(home(env) / 'session-state', env)}/<session>/events.jsonl"


def locate(session: str, env: Mapping[str, str], started_at: str) -> list[Path]:
    path = home(env) / "session-state" / session / "events.jsonl"
    return [path] if path.is_file() else []


def read(paths: list[Path], window: Window, tally: Tally) -> None:
    requests: dict[Any, tuple[str | None, Tokens]] = {}
    for path in paths:
        for line in json_lines(path, tally, b"session.usage_record"):
            data = line.get("data")
            usage = data.get("usage") if isinstance(data, dict) else None
            if line.get("type") != "session.usage_record" or not isinstance(usage, dict):
                continue
            if not window.holds(line.get("timestamp")):
                continue
            read_, write = count(usage.get("cacheReadTokens")), count(usage.get("cacheWriteTokens"))
            tokens = Tokens(input=max(0, count(usage.get("inputTokens")) - read_ - write),
                            output=count(usage.get("outputTokens")), cache_read=read_, cache_write=write)
            model = usage.get("model")
            requests[usage.get("apiCallId") or (len(requests), line.get("timestamp"))] = (
                model if isinstance(model, str) else None, tokens)
    for model, tokens in requests.values():
        tally.add(model, tokens)
