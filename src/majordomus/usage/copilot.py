"""Copilot CLI's session events: `~/.copilot/session-state/<session>/events.jsonl` (the folder is
`$COPILOT_HOME` when set, else `$XDG_CONFIG_HOME/.copilot`… as the client resolves it), one event a line.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from majordomus.usage.tally import Tally, Tokens, Window, count, home_of, json_lines, shown

TITLE = "Copilot CLI"


def home(env: Mapping[str, str]) -> Path:
    given = env.get("COPILOT_HOME")
    return Path(given) if given else home_of(env) / ".copilot"


def where(env: Mapping[str, str]) -> str:
    return f"{shown(home(env) / 'session-state', env)}/<session>/events.jsonl"


def locate(session: str, env: Mapping[str, str]) -> list[Path]:
    path = home(env) / "session-state" / session / "events.jsonl"
    return [path] if path.is_file() else []


def read(paths: list[Path], window: Window, tally: Tally) -> None:
    for path in paths:
        for line in json_lines(path, tally, b"usage"):
            data = line.get("data")
            if line.get("type") != "assistant.usage" or not isinstance(data, dict):
                continue
            if not window.holds(line.get("timestamp")):
                continue
            tally.add(data.get("model") if isinstance(data.get("model"), str) else None,
                      Tokens(input=count(data.get("inputTokens")), output=count(data.get("outputTokens")),
                             cache_read=count(data.get("cacheReadTokens")),
                             cache_write=count(data.get("cacheWriteTokens"))))
