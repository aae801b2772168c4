"""The counting every reader shares: four token counts per model, the episode's window, and a bounded reader of
a client's file (lines, or one JSON document) that says what it could not read instead of stopping.

Tokens are kept disjoint, so that they add up and price separately: `input` is the prompt tokens neither read
from nor written to a cache (a client whose API counts cached tokens inside its input has them taken out by its
reader), `output` includes reasoning ("thinking") tokens, which every vendor bills as output.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

KINDS = ("input", "output", "cache_read", "cache_write")
MAX_FILE_BYTES = 256 * 1024 * 1024  # past this much of one file, the rest is not read and the usage says so
MAX_LINE_BYTES = 16 * 1024 * 1024  # one line of a transcript (a huge tool output); a longer one is skipped


@dataclass(frozen=True)
class Tokens:
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0

    def __add__(self, other: Tokens) -> Tokens:
        return Tokens(self.input + other.input, self.output + other.output, self.cache_read + other.cache_read,
                      self.cache_write + other.cache_write)

    @property
    def total(self) -> int:
        return self.input + self.output + self.cache_read + self.cache_write

    def to_json(self) -> dict[str, int]:
        return {"input": self.input, "output": self.output, "cache_read": self.cache_read,
                "cache_write": self.cache_write}

    @classmethod
    def from_json(cls, doc: Any) -> Tokens:
        return cls(*(count(doc.get(k)) if isinstance(doc, dict) else 0 for k in KINDS))


def home_of(env: Mapping[str, str]) -> Path:
    return Path(env.get("HOME") or Path.home())


def client_dir(env: Mapping[str, str], variable: str, default: str) -> Path:
    """A client's folder: the variable that moves it, else `default` in the home."""
    given = env.get(variable)
    return Path(given) if given else home_of(env) / default


def shown(path: Path, env: Mapping[str, str]) -> str:
    """A path as a sentence names it: `~/.claude/projects` under the home, else whole."""
    home = home_of(env)
    return f"~/{path.relative_to(home)}" if path.is_relative_to(home) and path != home else str(path)


_INDEXES: dict[tuple[str, Callable[[str], str | None]], tuple[int, dict[str, list[str]]]] = {}


def indexed(directory: Path, key_of: Callable[[str], str | None]) -> dict[str, list[str]]:
    """A folder's file names by the key each names (a session id in it), listed once while the folder is
    unchanged: a client keeps thousands of sessions in one folder, and a listing reads every episode's."""
    try:
        stamp = directory.stat().st_mtime_ns
    except OSError:
        return {}
    kept = _INDEXES.get((str(directory), key_of))
    if kept is not None and kept[0] == stamp:
        return kept[1]
    found: dict[str, list[str]] = {}
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return {}
    for name in names:
        key = key_of(name)
        if key is not None:
            found.setdefault(key, []).append(name)
    if len(_INDEXES) > 4096:  # a server lives long; the folders of one listing are a few
        _INDEXES.clear()
    _INDEXES[(str(directory), key_of)] = (stamp, found)
    return found


def count(found: Any) -> int:
    """A token count as a client wrote it: a non-negative whole number, anything else 0."""
    return found if isinstance(found, int) and not isinstance(found, bool) and found > 0 else 0


@dataclass(frozen=True)
class Window:
    """The episode's span in epoch seconds, `start` included, `end` not. From its record alone that is its start's
    second to the end of its close's second; where this checkout knows the moment a close was written (the
    working context's last write) that moment bounds the episode closed then, and the one of its client session
    that opened after it: two episodes sharing a second are told apart."""

    start: float
    end: float

    @classmethod
    def of(cls, started_at: str, closed_at: str, *, after: float | None = None, until: float | None = None
           ) -> Window:
        start, close = epoch(started_at), epoch(closed_at)
        if start is None or close is None:
            raise ValueError(f"not an episode's moments: {started_at!r}, {closed_at!r}")
        return cls(start if after is None else max(start, after), close + 1 if until is None else until)

    def holds(self, stamp: Any) -> bool:
        moment = epoch(stamp)
        return moment is not None and self.start <= moment < self.end


def epoch(stamp: Any) -> float | None:
    """Epoch seconds of an ISO 8601 moment in UTC (`…Z`) or with an offset, or of epoch milliseconds; None for
    anything else (a moment without a zone says nothing certain)."""
    if isinstance(stamp, str):
        try:
            moment = datetime.fromisoformat(stamp)
        except ValueError:
            return None
        return None if moment.tzinfo is None else moment.timestamp()
    if isinstance(stamp, (int, float)) and not isinstance(stamp, bool) and stamp > 10**11:
        return stamp / 1000
    return None


@dataclass
class Tally:
    """What one episode's readers found: tokens and model requests per model, and what they could not read."""

    models: dict[str, Tokens] = field(default_factory=dict)
    requests: dict[str, int] = field(default_factory=dict)
    skipped: int = 0  # lines or entries that were not what the client writes
    cut: str | None = None  # a sentence when a bound stopped the reading

    def add(self, model: str | None, tokens: Tokens, requests: int = 1) -> None:
        name = model or "unknown"
        self.models[name] = self.models.get(name, Tokens()) + tokens
        self.requests[name] = self.requests.get(name, 0) + requests


def json_lines(path: Path, tally: Tally, *wanted: bytes) -> Iterator[dict[str, Any]]:
    """Each line of a JSONL file that is a JSON object, read in bounded pieces. `wanted`: lines holding none of
    these bytes are passed over unparsed (a transcript is mostly text the usage does not need). A line that is not JSON
    is counted in `skipped`, except a last line still being written; a bound reached is said in `cut`."""
    read = 0
    with path.open("rb") as handle:
        while True:
            line = handle.readline(MAX_LINE_BYTES + 1)
            if not line:
                return
            read += len(line)
            if read > MAX_FILE_BYTES:
                tally.cut = f"only the first {MAX_FILE_BYTES // (1024 * 1024)} MiB of {path} were read"
                return
            if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
                tally.skipped += 1
                while line and not line.endswith(b"\n"):  # the rest of the over-long line
                    line = handle.readline(MAX_LINE_BYTES + 1)
                    read += len(line)
                continue
            if wanted and not any(w in line for w in wanted):
                continue
            try:
                doc = json.loads(line)
            except ValueError:
                if line.endswith(b"\n"):
                    tally.skipped += 1
                continue
            if isinstance(doc, dict):
                yield doc
            else:
                tally.skipped += 1


def json_document(path: Path, tally: Tally) -> Any:
    """A file that is one JSON document, read only within the bound; None (and `cut` or `skipped` said) when it
    is too large or not JSON."""
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        tally.cut = f"{path} is larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB and was not read"
        return None
    try:
        return json.loads(path.read_bytes())
    except ValueError:
        tally.skipped += 1
        return None
