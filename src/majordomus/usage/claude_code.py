"""Claude Code's transcript: `<config>/projects/<project>/<session>.jsonl`, one JSON object a line, and its
subagents' beside it under `<session>/subagents/`. `<config>` is `$CLAUDE_CONFIG_DIR`, else `~/.claude`.

An answer of the model is an `assistant` line whose `message` holds `model`, `id` and `usage` (Anthropic's
Messages usage: `input_tokens` without the cache, `cache_read_input_tokens`, `cache_creation_input_tokens`,
`output_tokens`). An answer of several content blocks is written as several lines repeating the same message
id and `requestId`: counted once, with the largest figure each line reported.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from majordomus.usage.tally import Tally, Tokens, Window, client_dir, count, json_lines, shown

TITLE = "Claude Code"
SYNTHETIC = "<synthetic>"  # Claude Code's own placeholder answers (an interrupted turn): no model was asked


def config_dir(env: Mapping[str, str]) -> Path:
    return client_dir(env, "CLAUDE_CONFIG_DIR", ".claude")


def where(env: Mapping[str, str]) -> str:
    return f"{shown(config_dir(env) / 'projects', env)}/*/<session>.jsonl"


def locate(session: str, env: Mapping[str, str], started_at: str) -> list[Path]:
    projects = config_dir(env) / "projects"
    found: list[Path] = []
    try:
        folders = sorted(p for p in projects.iterdir() if p.is_dir())
    except OSError:
        return []
    for folder in folders:
        main = folder / f"{session}.jsonl"
        if main.is_file():
            found.append(main)
            found.extend(sorted((folder / session / "subagents").glob("*.jsonl")))
    return found


def read(paths: list[Path], window: Window, tally: Tally) -> None:
    answers: dict[tuple[object, object], tuple[str, Tokens]] = {}
    for n, path in enumerate(paths):
        for line in json_lines(path, tally, b'"usage"'):
            message = line.get("message")
            if line.get("type") != "assistant" or not isinstance(message, dict):
                continue
            usage, model = message.get("usage"), message.get("model")
            if not isinstance(usage, dict) or model == SYNTHETIC or not window.holds(line.get("timestamp")):
                continue
            tokens = Tokens(count(usage.get("input_tokens")), count(usage.get("output_tokens")),
                            count(usage.get("cache_read_input_tokens")),
                            count(usage.get("cache_creation_input_tokens")))
            key = (message.get("id") or (n, line.get("uuid")), line.get("requestId"))
            seen = answers.get(key)
            if seen is not None:
                old = seen[1]
                tokens = Tokens(max(old.input, tokens.input), max(old.output, tokens.output),
                                max(old.cache_read, tokens.cache_read), max(old.cache_write, tokens.cache_write))
            answers[key] = (model if isinstance(model, str) else "unknown", tokens)
    for model, tokens in answers.values():
        tally.add(model, tokens)
