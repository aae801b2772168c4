"""Codex's rollout: `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<local time>-<session>.jsonl` (`CODEX_HOME` is
`~/.codex` unless set), one JSON object a line, each with a `timestamp`, a `type` and a `payload`.

The model of a turn is its `turn_context` line's `model`; usage comes in `event_msg` lines of payload type
`token_count`, whose `info.total_token_usage` is the session's running total (OpenAI's counting: `input_tokens`
includes `cached_input_tokens`, `output_tokens` includes `reasoning_output_tokens`). A token count can be
repeated without a new request, so what a stretch used is the growth of the running total, never a sum of the
per-request figures; a total that falls is a new process counting from zero.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from majordomus.usage.tally import Tally, Tokens, Window, count, home_of, json_lines, shown

TITLE = "Codex"


def home(env: Mapping[str, str]) -> Path:
    given = env.get("CODEX_HOME")
    return Path(given) if given else home_of(env) / ".codex"


def where(env: Mapping[str, str]) -> str:
    return f"{shown(home(env) / 'sessions', env)}/YYYY/MM/DD/rollout-*-<session>.jsonl"


def locate(session: str, env: Mapping[str, str]) -> list[Path]:
    found: list[Path] = []
    for folder in ("sessions", "archived_sessions"):
        found.extend(sorted((home(env) / folder).glob(f"**/rollout-*-{session}.jsonl")))
    return found


def _running(total: Any) -> tuple[int, int, int] | None:
    """(input without the cache, cache read, output) of a running total."""
    if not isinstance(total, dict):
        return None
    cached = count(total.get("cached_input_tokens"))
    return max(0, count(total.get("input_tokens")) - cached), cached, count(total.get("output_tokens"))


def read(paths: list[Path], window: Window, tally: Tally) -> None:
    for path in paths:
        model: str | None = None
        before = (0, 0, 0)
        for line in json_lines(path, tally):
            payload = line.get("payload")
            if not isinstance(payload, dict):
                continue
            if line.get("type") == "turn_context" and isinstance(payload.get("model"), str):
                model = payload["model"]
                continue
            if line.get("type") != "event_msg" or payload.get("type") != "token_count":
                continue
            info = payload.get("info")
            now = _running(info.get("total_token_usage")) if isinstance(info, dict) else None
            if now is None:
                continue
            fresh = any(n < b for n, b in zip(now, before))
            grown = now if fresh else tuple(n - b for n, b in zip(now, before))
            before = now
            if any(grown) and window.holds(line.get("timestamp")):
                tally.add(model, Tokens(input=grown[0], cache_read=grown[1], output=grown[2]))
