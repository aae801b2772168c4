"""Gemini CLI's chat record: `<home>/.gemini/tmp/<project>/chats/session-<time>-<session's first 8>.jsonl`
(`<home>` is `$GEMINI_CLI_HOME`, else the home; `<project>` the short name in `~/.gemini/projects.json`). The
first line names the `sessionId`; each answer of the model is then a line of type `gemini` with its `id`,
`model`, `timestamp` and `tokens`. A message is written again as it grows (its last line counts), and a
resumed session rewrites its history in a `$set` line without tokens, which is not a message line and is passed
over. An older Gemini CLI wrote `session-….json`, one document whose `messages` are the same objects.

Gemini counts the cached tokens inside `input` and the reasoning (`thoughts`) beside `output`; here the input is
without the cache and the output with the thoughts, as they are billed. The router's own small requests are not
in the record, and not counted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from majordomus.usage.tally import Tally, Tokens, Window, count, home_of, indexed, json_document, json_lines, shown

TITLE = "Gemini CLI"


def home(env: Mapping[str, str]) -> Path:
    given = env.get("GEMINI_CLI_HOME")
    return (Path(given) if given else home_of(env)) / ".gemini"


def where(env: Mapping[str, str]) -> str:
    return f"{shown(home(env) / 'tmp', env)}/*/chats/session-*-<session's first 8>.jsonl"


def short_of(name: str) -> str | None:
    """`session-2026-12-07T23-35-<first 8 of the session>.jsonl` → those 8 characters."""
    if not name.startswith("session-") or not name.endswith((".json", ".jsonl")):
        return None
    return name.rsplit(".", 1)[0].rsplit("-", 1)[-1]


def locate(session: str, env: Mapping[str, str], started_at: str) -> list[Path]:
    """The chat files whose name carries the session's first 8 characters and whose opening names the session
    (8 characters alone could be another session's), in every project's folder."""
    found = []
    for chats in sorted((home(env) / "tmp").glob("*/chats")):
        for name in indexed(chats, short_of).get(session[:8], []):
            if _names(chats / name, session):
                found.append(chats / name)
    return found


def _names(path: Path, session: str) -> bool:
    try:
        with path.open("rb") as handle:
            head = handle.read(4096)
    except OSError:
        return False
    return f'"{session}"'.encode() in head


def tokens_of(tokens: Any) -> Tokens:
    if not isinstance(tokens, dict):
        return Tokens()
    cached = count(tokens.get("cached"))
    return Tokens(input=max(0, count(tokens.get("input")) - cached), cache_read=cached,
                  output=count(tokens.get("output")) + count(tokens.get("thoughts")))


def _messages(path: Path, tally: Tally) -> Iterable[Any]:
    if path.suffix == ".jsonl":
        return json_lines(path, tally, b'"tokens"')
    doc = json_document(path, tally)
    messages = doc.get("messages") if isinstance(doc, dict) else None
    if doc is not None and not isinstance(messages, list):
        tally.skipped += 1
    return messages if isinstance(messages, list) else []


def read(paths: list[Path], window: Window, tally: Tally) -> None:
    answers: dict[Any, tuple[str | None, Tokens]] = {}
    for n, path in enumerate(paths):
        for m in _messages(path, tally):
            if not isinstance(m, dict) or m.get("type") != "gemini" or not isinstance(m.get("tokens"), dict):
                continue
            if not window.holds(m.get("timestamp")):
                continue
            model = m.get("model")
            answers[m.get("id") or (n, len(answers))] = (model if isinstance(model, str) else None,
                                                         tokens_of(m["tokens"]))
    for model, tokens in answers.values():
        tally.add(model, tokens)
