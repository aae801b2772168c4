"""Codex's rollout: `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<start time>-<session>.jsonl` (`CODEX_HOME` is
`~/.codex` unless set), one JSON object a line, each with a `timestamp`, a `type` and a `payload`; a resumed
session appends to the same file.

Each model request is a `token_usage_record` line (Codex 0.171): its `payload.usage` is that request's own count,
`response_id` names the request (a record written twice counts once), `turn_id` the turn, whose `turn_context`
line names the model. OpenAI's counting puts the cached and cache-written tokens inside `input_tokens` and the
reasoning tokens inside `output_tokens`; the input is counted here without them.
A rollout of an older Codex, with no such record, has only `token_count` events, whose `total_token_usage` is the
session's running total: what a stretch used is that total's growth (a count repeated without a request adds
nothing; a total that falls is a new process counting from zero).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from majordomus.usage.tally import Tally, Tokens, Window, client_dir, count, epoch, indexed, json_lines, shown

TITLE = "Codex"


def home(env: Mapping[str, str]) -> Path:
    return client_dir(env, "CODEX_HOME", ".codex")


def where(env: Mapping[str, str]) -> str:
    return f"{shown(home(env) / 'sessions', env)}/YYYY/MM/DD/rollout-*-<session>.jsonl"


def session_of(name: str) -> str | None:
    """`rollout-2026-12-07T23-31-02-<session>.jsonl` → the session (its last 36 characters before `.jsonl`)."""
    return name[-42:-6] if name.startswith("rollout-") and name.endswith(".jsonl") and len(name) > 50 else None


def locate(session: str, env: Mapping[str, str], started_at: str) -> list[Path]:
    """The rollout is in the folder of the day its session started (in the machine's local time): first the
    episode's own day and the days either side, else every day's folder (a session resumed days later);
    and `archived_sessions`. Each folder is listed once while it is unchanged."""
    sessions, start = home(env) / "sessions", epoch(started_at)
    near = sorted({time.strftime("%Y/%m/%d", time.gmtime(start + shift)) for shift in (-86400, 0, 86400)}) \
        if start is not None else []
    found = _in(session, [sessions / day for day in near])
    if not found:
        found = _in(session, sorted(p for p in sessions.glob("[0-9]*/[0-9]*/[0-9]*") if p.is_dir()))
    return found + _in(session, [home(env) / "archived_sessions"])


def _in(session: str, folders: list[Path]) -> list[Path]:
    return [folder / name for folder in folders for name in indexed(folder, session_of).get(session, [])]


def tokens_of(usage: Any) -> Tokens:
    """One request's count in OpenAI's terms, as the four disjoint kinds."""
    if not isinstance(usage, dict):
        return Tokens()
    read, write = count(usage.get("cached_input_tokens")), count(usage.get("cache_write_input_tokens"))
    return Tokens(input=max(0, count(usage.get("input_tokens")) - read - write),
                  output=count(usage.get("output_tokens")), cache_read=read, cache_write=write)


def read(paths: list[Path], window: Window, tally: Tally) -> None:
    for path in paths:
        models: dict[Any, str] = {}
        records: dict[Any, tuple[Any, Tokens]] = {}
        running: list[tuple[str | None, Any, Tokens]] = []  # the older form: (model, stamp, running total)
        model: str | None = None
        for line in json_lines(path, tally, b'"turn_context"', b'"token_usage_record"', b'"token_count"'):
            payload, kind = line.get("payload"), line.get("type")
            if not isinstance(payload, dict):
                continue
            if kind == "turn_context" and isinstance(payload.get("model"), str):
                model = payload["model"]
                models[payload.get("turn_id")] = model
            elif kind == "token_usage_record":
                if window.holds(line.get("timestamp")):
                    key = payload.get("response_id") or (len(records), line.get("timestamp"))
                    records[key] = (payload.get("turn_id"), tokens_of(payload.get("usage")))
            elif kind == "event_msg" and payload.get("type") == "token_count" and isinstance(payload.get("info"),
                                                                                               dict):
                running.append((model, line.get("timestamp"), tokens_of(payload["info"].get("total_token_usage"))))
        for turn, tokens in records.values():
            tally.add(models.get(turn), tokens)
        if not records:
            _growth(running, window, tally)


def _growth(running: list[tuple[str | None, Any, Tokens]], window: Window, tally: Tally) -> None:
    before = Tokens()
    for model, stamp, now in running:
        kinds = list(zip((now.input, now.output, now.cache_read, now.cache_write),
                         (before.input, before.output, before.cache_read, before.cache_write)))
        grown = now if any(n < b for n, b in kinds) else Tokens(*(n - b for n, b in kinds))
        before = now
        if grown.total and window.holds(stamp):
            tally.add(model, grown)
