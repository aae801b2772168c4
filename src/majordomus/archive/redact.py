"""Applies the credential table (redact_rules.json) to prompt text before anything is persisted.

Runs on the hook path: stdlib only. The table is compiled from redact_rules.yaml by
`python -m majordomus.archive.redact_table --write`, which proves every row against its examples and
near-misses; this module only reads the JSON. Every pattern in the table is linear-time in Python's `re`.
"""

from __future__ import annotations

import bisect

from majordomus import jsonlite
from majordomus.paths import LitePath
from majordomus.values import value

TYPE_CHECKING = False
if TYPE_CHECKING:
    import re
    from typing import Any

# `re` is imported only when a text needs a rule (a hint is in it) or a hint is a `/regex/`: ~5 ms of a hook
TABLE = LitePath(__file__).with_name("redact_rules.json")

# A span with fewer distinct characters than this (`AKIAXXXXXXXXXXXXXXXX`, `ghp_xxxx…`) or whose
# tail is a run of one or two characters (`sk-proj-xxxx…`, `Bearer XXXX-XXXX…`) is a placeholder or
# an adversarial run, not a credential (REDACTION.md §0.3, §2.9). Random tails never look like that.
MIN_DISTINCT_CHARACTERS = 8
TAIL_LENGTH = 16
MIN_DISTINCT_IN_TAIL = 4


@value
class Rule:
    """One credential shape. If `pattern` has a group named `secret`, only that group is replaced.

    `hints` are lowercase substrings at least one of which every match contains (its literal prefix,
    the names the assignment rule knows): a text without any of them cannot match, so the rule is
    neither compiled nor run. Compiling the whole table costs a hook ~8 ms; most prompts need none of it.
    """

    name: str
    source: str
    sample: str
    hints: tuple[str, ...] = ()

    @property
    def pattern(self) -> re.Pattern[str]:
        import re

        return re.compile(self.source)  # `re` caches compiled patterns per process

    def may_match(self, text: str, lowered: str) -> bool:
        """A hint is a lowercase substring, or `/regex/`: a small pattern searched case-insensitively."""
        if not self.hints:
            return True
        for hint in self.hints:
            if hint.startswith("/") and hint.endswith("/") and len(hint) > 2:
                import re

                if re.search(hint[1:-1], text, re.IGNORECASE):
                    return True
            elif hint in lowered:
                return True
        return False


_rules: list[Rule] | None = None


def _parse_rules(raw: dict[str, Any]) -> list[Rule]:
    """The compiled table's rules in order (redact_table has already proved them)."""
    return [Rule(name=r["name"], source=r["pattern"], sample=r["examples"][0]["text"], hints=tuple(r["hints"]))
            for r in raw["rules"]]


def load_rules() -> list[Rule]:
    """The table in order, read once per process; each pattern is compiled on first use."""
    global _rules
    if _rules is None:
        _rules = _parse_rules(jsonlite.loads(TABLE.read_bytes().decode("utf-8")))
    return list(_rules)


def _is_placeholder(span: str) -> bool:
    return len(set(span)) < MIN_DISTINCT_CHARACTERS or len(set(span[-TAIL_LENGTH:])) < MIN_DISTINCT_IN_TAIL


def _find_spans(text: str, rules: list[Rule], use_hints: bool = True) -> list[tuple[int, int, str]]:
    """Non-overlapping (start, end, rule) spans, sorted. An earlier rule wins an overlap, so a specific
    shape outranks `assignment` (`token: ghs_…@github.com` loses the token, not the URL)."""
    starts: list[int] = []
    ends: list[int] = []
    names: list[str] = []
    lowered = text.lower()
    for rule in rules:
        if use_hints and not rule.may_match(text, lowered):
            continue
        pattern = rule.pattern
        has_secret = "secret" in pattern.groupindex
        for match in pattern.finditer(text):
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


def redact(text: str, *, use_hints: bool = True) -> tuple[str, tuple[str, ...]]:
    """Return the text with each credential replaced by `[redacted:<rule>]`, and the sorted unique
    names of the rules that fired (empty, and the text unchanged, when nothing matched).

    `use_hints=False` runs every rule on every text: tests use it to prove the hints hide nothing."""
    spans = _find_spans(text, load_rules(), use_hints)
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
