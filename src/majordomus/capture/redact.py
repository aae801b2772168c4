"""Applies the credential table (redact_rules.tsv) to prompt text before anything is persisted.

Runs on the hook path: stdlib only. Every pattern in the table is linear-time in Python's `re`.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from pathlib import Path

TABLE = Path(__file__).with_name("redact_rules.tsv")

# A span with fewer distinct characters than this (`AKIAXXXXXXXXXXXXXXXX`, `ghp_xxxx…`) or whose
# tail is a run of one or two characters (`sk-proj-xxxx…`, `Bearer XXXX-XXXX…`) is a placeholder or
# an adversarial run, not a credential (REDACTION.md §0.3, §2.9). Random tails never look like that.
MIN_DISTINCT_CHARACTERS = 8
TAIL_LENGTH = 16
MIN_DISTINCT_IN_TAIL = 4

_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")


@dataclass(frozen=True)
class Rule:
    """One credential shape. If `pattern` has a group named `secret`, only that group is replaced."""

    name: str
    pattern: re.Pattern[str]
    sample: str


_rules: list[Rule] | None = None


def _parse_rules(text: str, source: str = "redact_rules.tsv") -> list[Rule]:
    """Parse the table; refuse malformed rows and duplicate names rather than guess."""
    rules: list[Rule] = []
    seen: set[str] = set()
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) != 3:
            raise ValueError(f"{source}:{number}: expected name<TAB>pattern<TAB>sample, got {len(fields)} field(s)")
        name, pattern, sample = fields
        if not _NAME.fullmatch(name):
            raise ValueError(f"{source}:{number}: rule name {name!r} is not lowercase-hyphenated")
        if name in seen:
            raise ValueError(f"{source}:{number}: duplicate rule name {name!r}")
        seen.add(name)
        try:
            compiled = re.compile(pattern)
        except re.error as error:
            raise ValueError(f"{source}:{number}: rule {name!r} does not compile: {error}") from None
        rules.append(Rule(name=name, pattern=compiled, sample=sample))
    return rules


def load_rules() -> list[Rule]:
    """The table in order, compiled once per process (lazily: importing this module compiles nothing)."""
    global _rules
    if _rules is None:
        _rules = _parse_rules(TABLE.read_text(encoding="utf-8"))
    return list(_rules)


def _is_placeholder(span: str) -> bool:
    return len(set(span)) < MIN_DISTINCT_CHARACTERS or len(set(span[-TAIL_LENGTH:])) < MIN_DISTINCT_IN_TAIL


def _find_spans(text: str, rules: list[Rule]) -> list[tuple[int, int, str]]:
    """Non-overlapping (start, end, rule) spans, sorted. An earlier rule wins an overlap, so a specific
    shape outranks `assignment` (`token: ghs_…@github.com` loses the token, not the URL)."""
    starts: list[int] = []
    ends: list[int] = []
    names: list[str] = []
    for rule in rules:
        has_secret = "secret" in rule.pattern.groupindex
        for match in rule.pattern.finditer(text):
            start, end = match.span("secret") if has_secret else match.span()
            if start >= end or _is_placeholder(text[start:end]):
                continue
            # Accepted spans never overlap, so their ends are sorted like their starts.
            index = bisect.bisect_right(starts, start)
            if index and ends[index - 1] > start:
                continue
            if index < len(starts) and starts[index] < end:
                continue
            starts.insert(index, start)
            ends.insert(index, end)
            names.insert(index, rule.name)
    return list(zip(starts, ends, names))


def redact(text: str) -> tuple[str, tuple[str, ...]]:
    """Return the text with each credential replaced by `[redacted:<rule>]`, and the sorted unique
    names of the rules that fired (empty, and the text unchanged, when nothing matched)."""
    spans = _find_spans(text, load_rules())
    if not spans:
        return text, ()
    pieces: list[str] = []
    position = 0
    for start, end, name in spans:
        pieces.append(text[position:start])
        pieces.append(f"[redacted:{name}]")
        position = end
    pieces.append(text[position:])
    return "".join(pieces), tuple(sorted({name for _, _, name in spans}))
