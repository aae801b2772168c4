"""Gemini CLI's chat record: `~/.gemini/tmp/<project>/chats/session-<time>-<session's first 8>.json` (the home
is `$GEMINI_CLI_HOME` when set), one JSON document: `sessionId` and `messages`, each answer of the model a
message of type `gemini` with `model`, `timestamp` and `tokens` (`input` includes `cached`, `output` leaves
out `thoughts`, which are billed as output).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from majordomus.usage.tally import Tally, Tokens, Window, count, home_of, json_document, shown

TITLE = "Gemini CLI"


def home(env: Mapping[str, str]) -> Path:
    given = env.get("GEMINI_CLI_HOME")
    return (Path(given) if given else home_of(env)) / ".gemini"


def where(env: Mapping[str, str]) -> str:
    return f"{shown(home(env) / 'tmp', env)}/*/chats/session-*-<session's first 8>.json"


def locate(session: str, env: Mapping[str, str]) -> list[Path]:
    return sorted((home(env) / "tmp").glob(f"*/chats/session-*-{session[:8]}*.json"))


def read(paths: list[Path], window: Window, tally: Tally) -> None:
    for path in paths:
        doc = json_document(path, tally)
        if not isinstance(doc, dict):
            continue
        messages = doc.get("messages")
        if not isinstance(messages, list):
            tally.skipped += 1
            continue
        for m in messages:
            if not isinstance(m, dict) or m.get("type") != "gemini" or not window.holds(m.get("timestamp")):
                continue
            tokens = m.get("tokens")
            if not isinstance(tokens, dict):
                continue
            cached = count(tokens.get("cached"))
            tally.add(m.get("model") if isinstance(m.get("model"), str) else None,
                      Tokens(input=max(0, count(tokens.get("input")) - cached), cache_read=cached,
                             output=count(tokens.get("output")) + count(tokens.get("thoughts"))))
