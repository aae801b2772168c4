"""Applies the credential table (majordomus/redact_rules.py) to prompt text before anything is persisted.

Runs on the hook path: stdlib only. The table is compiled from archive/redact_rules.yaml by
`python -m majordomus.archive.redact_table --write`, which proves every row against its examples and
near-misses and writes the rows this module applies (redact_rules.py, cached bytecode: nothing is parsed on a
prompt) beside the proved table (archive/redact_rules.json). Every pattern in the table is linear-time in
Python's `re`.

How a rule runs (its `anchor`), cheapest first:
- every rule has `hints`, lowercase substrings one of which every match contains: a text with none of them
  skips the rule, which is then neither compiled nor run (compiling the whole table costs a hook ~10 ms);
  a hint costs one scan of the text, and so does a pattern with a literal prefix (`re` skips to it), so on
  a long text a rule with several hints and no anchor is run without them: one scan, not one per hint;
- `anchor: hint`: every match starts where a hint occurs, so the pattern is tried only there (`str.find`,
  no scan of the text by a pattern whose first character is a class or case-insensitive); with `locate`,
  only where one of those patterns over the lowercased text matches (a hint and what must follow it);
- `anchor: name`: the assignment rules. `locate` are small patterns over the lowercased text, one per
  credential word with a literal start, that find a word followed by an operator and the start of a value;
  the rule is tried only at the start of the name that ends there. Prose full of "token" and "key" costs
  a few literal scans, not a pattern tried at every position;
- otherwise the pattern scans the text (its literal prefix makes `re` skip to candidates).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import re
    from typing import Any, Callable, Iterator

    from majordomus.layout import Layout

# `re` is imported only when a text needs a rule (one of its hints is in the text): ~5 ms of every hook; and not
# even then where the worktree keeps the table's compiled patterns (majordomus.lean.kept_patterns)

_compiled: dict[str, re.Pattern[str]] = {}
_keeper: Layout | None = None  # the worktree whose kept patterns this process uses (keep_compiled_in)
_missed = False  # a pattern was compiled by `re` while a worktree keeps them: its file is worth writing


def keep_compiled_in(layout: Layout) -> None:
    """Compile the table's patterns from the code this worktree keeps (majordomus.lean.kept_patterns)."""
    global _keeper
    _keeper = layout


def take_missed() -> bool:
    """Whether a pattern was compiled by `re` although a worktree keeps them, since this was last asked."""
    global _missed
    missed, _missed = _missed, False
    return missed


def compiled(source: str) -> re.Pattern[str]:
    """A pattern of the table, compiled once per process: from the code the worktree keeps, else by `re`."""
    global _missed
    found = _compiled.get(source)
    if found is None:
        if _keeper is not None:
            from majordomus.lean import kept_patterns

            found = kept_patterns.compiled(_keeper, source)
            _missed = _missed or found is None
        if found is None:
            import re

            found = re.compile(source)
        _compiled[source] = found
    return found


def table_sources() -> list[str]:
    """Every pattern the table's rules compile on the hook path: what a worktree keeps compiled."""
    sources = [_NAME_TAIL]
    for rule in load_rules():
        sources.append(rule.source)
        sources.extend(rule.locate)
    return sources

# A span with fewer distinct characters than this (`AKIAXXXXXXXXXXXXXXXX`, `ghp_xxxx…`) or whose
# tail is a run of one or two characters (`sk-proj-xxxx…`, `Bearer XXXX-XXXX…`) is a placeholder or
# an adversarial run, not a credential (REDACTION.md §0.3, §2.9). Random tails never look like that.
MIN_DISTINCT_CHARACTERS = 8
TAIL_LENGTH = 16
MIN_DISTINCT_IN_TAIL = 4

# A value with no digit and no shell-special character is a credential only when it looks random:
# long, high in entropy, and mixing upper and lower case the way random letters do (an identifier such as
# `getAuthenticationToken` has one capital in six letters, random letters one in two).
WEAK_MIN_LENGTH = 20
WEAK_MIN_ENTROPY = 3.5
WEAK_MIN_CASE_SHARE = 0.25
_STRONG = frozenset("0123456789!#$%^&*@")  # a digit or a shell-special character

# From this length on, a rule's pattern has been compiled anyway and one scan by it beats several hint scans.
LONG_TEXT = 65536
# Trying a pattern at one hinted start costs Python ~2 us; `re` scanning one character costs ~30 ns. A text with
# more than one hint per this many characters ('Basic ' x 150k) is scanned whole: the same spans, in C.
DENSE_HINTS = 64
# The start of a name that ends at a given position: at most 64 name characters, not preceded by one.
_NAME_TAIL = r"(?<![A-Za-z0-9_.-])[A-Za-z0-9_.-]{1,64}\Z"
# Placeholder passwords in URL user-info: a word that names the field, not a value.
_USERINFO_PLACEHOLDERS = frozenset({"password", "passwd", "pass", "pwd", "pw", "secret", "token", "changeme"})


@dataclass(frozen=True)
class Rule:
    """One credential shape. If `pattern` has a group named `secret`, only that group is replaced.

    `hints`, `anchor` and `locate`: see the module docstring. `check` names a test the matched span must
    also pass (CHECKS); without one, a span that looks like a placeholder is dropped.
    """

    name: str
    source: str
    sample: str
    hints: tuple[str, ...] = ()
    anchor: str = ""
    locate: tuple[str, ...] = ()
    check: str = ""

    @property
    def pattern(self) -> re.Pattern[str]:
        return compiled(self.source)

    def may_match(self, text: str, lowered: str, known: dict[str, bool] | None = None) -> bool:
        """False when the text contains none of the hints (every match contains one). `known` says of some
        hints whether the text holds them (`_pivot_hints`: found in one scan with others)."""
        if known and self.hints and all(hint in known for hint in self.hints):
            return any(known[hint] for hint in self.hints)
        if len(self.hints) > 1 and self.anchor != "hint" and len(text) >= LONG_TEXT:
            return True
        if known:
            return not self.hints or any(known[hint] if hint in known else hint in lowered for hint in self.hints)
        return not self.hints or any(hint in lowered for hint in self.hints)

    def starts(self, text: str, lowered: str,
               located: dict[tuple[str, ...], list[int]] | None = None) -> list[int] | None:
        """Where a match may start, sorted (every accepted match starts at one); None: scan the whole text.

        `lowered` is the text lowercased with the same length."""
        if self.anchor == "hint":
            if self.locate:  # patterns over the lowercased text, whose matches start where the rule's may
                return _hint_located(self.locate, lowered)
            if sum(lowered.count(hint) for hint in self.hints) * DENSE_HINTS > len(lowered):
                return None
            return self._hint_starts(lowered)
        if self.anchor == "name":
            return _located(self.locate, text, lowered, {} if located is None else located)
        return None

    def _hint_starts(self, lowered: str) -> list[int]:
        starts: set[int] = set()
        for hint in self.hints:
            position = lowered.find(hint)
            while position >= 0:
                starts.add(position)
                position = lowered.find(hint, position + 1)
        return sorted(starts)



# On a long text, the hints that hold one of these characters are looked for in one scan per character (found at
# each occurrence of it by look-behinds, in C) instead of one scan per hint: `hf_`, `npm_`, `sk_`, `rk_`,
# `api_org_` and `github_pat_` cost one scan, not six. A text dense in the character (code is full of `_`) gets
# one scan per hint as before.
PIVOTS = "_-."
_pivot_patterns: dict[tuple[str, ...], re.Pattern[str]] = {}


def _pivot_hints(lowered: str, hints: tuple[str, ...]) -> dict[str, bool]:
    """Whether `lowered` holds each of the `hints` that has a pivot character, when that character is sparse."""
    known: dict[str, bool] = {}
    for pivot in PIVOTS:
        heads = {h: h[:h.rindex(pivot) + 1] for h in hints if pivot in h}
        # a pivot where two heads end tells one of them only: a head that ends another is left to its own scan
        group = tuple(h for h, head in heads.items()
                      if not any(o != h and (head.endswith(other) or other.endswith(head))
                                 for o, other in heads.items()))
        if len(group) < 2 or lowered.count(pivot) * DENSE_HINTS > len(lowered):
            continue
        pattern = _pivot_patterns.get(group)
        if pattern is None:
            import re

            # each hint up to its last pivot, as a look-behind ending at the pivot: a named group per hint
            ends = "|".join(f"(?<=(?P<h{n}>{re.escape(heads[h])}))" for n, h in enumerate(group))
            pattern = _pivot_patterns[group] = re.compile(f"{re.escape(pivot)}(?:{ends})")
        found = dict.fromkeys(group, False)
        for match in pattern.finditer(lowered):
            hint = group[int(str(match.lastgroup)[1:])]
            if not found[hint]:  # the head is there; the hint is if its tail follows
                found[hint] = lowered.startswith(hint, match.end() - len(heads[hint]))
        known.update(found)
    return known


def _hint_located(locate: tuple[str, ...], lowered: str) -> list[int]:
    """The starts of a hint-anchored rule's locator matches: each starts with a hint's literal, so `re` skips to
    it, and its look-ahead rejects in C what the rule would reject in a Python loop over every hint (prose full
    of "Bearer authentication" costs one scan, not a pattern tried at each of its 3,400 hints a MB)."""
    starts: set[int] = set()
    for source in locate:
        starts.update(found.start() for found in compiled(source).finditer(lowered))
    return sorted(starts)


def _located(locate: tuple[str, ...], text: str, lowered: str, cache: dict[tuple[str, ...], list[int]]) -> list[int]:
    """The starts of the names the locators find. `cache` holds them per call of redact(): the two assignment
    rules share their locators, so the text is scanned for the credential words once."""
    if locate not in cache:
        name_tail = compiled(_NAME_TAIL)
        starts: set[int] = set()
        for source in locate:
            for found in compiled(source).finditer(lowered):
                name = name_tail.search(text, max(0, found.end() - 65), found.end())
                if name is not None:
                    starts.add(name.start())
        cache[locate] = sorted(starts)
    return cache[locate]


def _entropy(span: str) -> float:
    import math  # only for a value without a digit

    counts: dict[str, int] = {}
    for character in span:
        counts[character] = counts.get(character, 0) + 1
    return -sum(n / len(span) * math.log2(n / len(span)) for n in counts.values())


def _is_placeholder(span: str) -> bool:
    # the head's distinct characters bound the whole's from below: a long span rarely needs its whole set
    return (len(set(span[-TAIL_LENGTH:])) < MIN_DISTINCT_IN_TAIL
            or (len(set(span[:64])) < MIN_DISTINCT_CHARACTERS and len(set(span)) < MIN_DISTINCT_CHARACTERS))


def _opaque(match: re.Match[str], span: str) -> bool:
    """The assignment rules: a value with a digit or a shell-special character is opaque enough; one made of
    letters and `_ . - + / ~ %` only must look random (long, high in entropy, cases mixed like random letters)."""
    if _is_placeholder(span):
        return False
    if not _STRONG.isdisjoint(span):
        return True
    if len(span) < WEAK_MIN_LENGTH:
        return False
    upper = sum(1 for c in span if "A" <= c <= "Z")
    lower = sum(1 for c in span if "a" <= c <= "z")
    letters = upper + lower
    return (letters > 0 and upper >= WEAK_MIN_CASE_SHARE * letters and lower >= WEAK_MIN_CASE_SHARE * letters
            and _entropy(span[:512]) >= WEAK_MIN_ENTROPY)


def _basic_credentials(match: re.Match[str], span: str) -> bool:
    """`Basic <base64>`: the base64 must decode to printable `user:password` (not the word "authentication")."""
    import binascii  # only where "basic" occurs

    encoded = span.split()[-1]
    try:
        decoded = binascii.a2b_base64(encoded + "=" * (-len(encoded) % 4)).decode("ascii")
    except (binascii.Error, UnicodeDecodeError):
        return False
    user, colon, password = decoded.partition(":")
    return bool(colon and password) and decoded.isprintable() and len(set(encoded)) >= 6


def _userinfo(match: re.Match[str], span: str) -> bool:
    """`scheme://user:password@host`: any password but a placeholder, a repeated character, or the user name
    again (`postgres:postgres@`, `guest:guest@`: a well-known default, not a secret)."""
    user = match.group("user") if "user" in match.re.groupindex else ""
    return span.lower() not in _USERINFO_PLACEHOLDERS and len(set(span)) > 1 and span != user


CHECKS: dict[str, Callable[[re.Match[str], str], bool]] = {
    "opaque": _opaque,
    "basic-credentials": _basic_credentials,
    "userinfo": _userinfo,
}


def _default_check(match: re.Match[str], span: str) -> bool:
    return not _is_placeholder(span)


_rules: list[Rule] | None = None


def _parse_rules(raw: dict[str, Any]) -> list[Rule]:
    """The compiled table's rules in order (redact_table has already proved them)."""
    return [Rule(name=r["name"], source=r["pattern"], sample=r["examples"][0]["text"], hints=tuple(r["hints"]),
                 anchor=r.get("anchor", ""), locate=tuple(r.get("locate", ())), check=r.get("check", ""))
            for r in raw["rules"]]


def load_rules() -> list[Rule]:
    """The table in order, loaded once per process from its generated module (cached bytecode, nothing parsed);
    each pattern is compiled on first use."""
    global _rules
    if _rules is None:
        from majordomus.redact_rules import RULES

        _rules = [Rule(*row) for row in RULES]
    return list(_rules)


def rule_spans(rule: Rule, text: str, lowered: str | None = None,
               located: dict[tuple[str, ...], list[int]] | None = None) -> Iterator[tuple[int, int]]:
    """The spans one rule replaces in `text`, left to right and not overlapping, before overlaps with other
    rules are resolved. A match a rule's named check rejects claims nothing: the next may start inside it
    (so a locator that skips what the check would reject finds exactly what a scan finds); one that only
    looks like a placeholder claims its span.

    With `lowered` (the text lowercased, same length) the pattern is tried only where the rule's anchor
    allows; without, it scans the whole text."""
    check = CHECKS.get(rule.check, _default_check)
    starts = rule.starts(text, lowered, located) if lowered is not None else None
    if starts is not None and not starts:
        return  # nothing to try: the pattern is not even compiled (the assignment one costs a hook ~10 ms)
    pattern = rule.pattern
    has_secret = "secret" in pattern.groupindex
    if starts is None and not rule.check:  # every match claims its span: `re` walks them itself
        judged: dict[str, bool] = {}  # a pasted log repeats its token: each distinct span is judged once
        for each in pattern.finditer(text):
            first, last = each.span("secret") if has_secret else each.span()
            if first < last:
                span = text[first:last]
                placeholder = judged.get(span)
                if placeholder is None:
                    placeholder = judged[span] = _is_placeholder(span)
                if not placeholder:
                    yield first, last
        return
    end = 0
    candidates = iter(starts) if starts is not None else None
    position = 0
    while True:
        if candidates is None:
            match = pattern.search(text, position) if position <= len(text) else None
            if match is None:
                return
        else:
            start = next(candidates, None)
            if start is None:
                return
            if start < end:
                continue
            match = pattern.match(text, start)
            if match is None:
                continue
        first, last = match.span("secret") if has_secret else match.span()
        accepted = first < last and check(match, text[first:last])
        if accepted:
            yield first, last
        if accepted or not rule.check:
            # a placeholder (`ghp_xxxx…`, `ghp_ghp_ghp_…`) claims its span like a credential: every start
            # costs at most one bounded quantifier, once (REDACTION.md R6)
            end = max(match.end(), match.start() + 1)
            position = end
        else:
            position = match.start() + 1


def _find_spans(text: str, rules: list[Rule], use_hints: bool = True) -> list[tuple[int, int, str]]:
    """Non-overlapping (start, end, rule) spans, sorted. An earlier rule wins an overlap, so a specific
    shape outranks `assignment` (`token: ghs_…@github.com` loses the token, not the URL)."""
    starts: list[int] = []
    ends: list[int] = []
    names: list[str] = []
    lowered = text.lower()
    aligned = lowered if use_hints and len(lowered) == len(text) else None
    located: dict[tuple[str, ...], list[int]] = {}
    known: dict[str, bool] | None = None
    if use_hints and len(text) >= LONG_TEXT:
        # the hints a rule would scan for, and those of a rule whose hints all hold a pivot (found in the same scans,
        # they decide the rule, which a long text otherwise runs without asking its hints)
        known = _pivot_hints(lowered, tuple(dict.fromkeys(
            h for r in rules if len(r.hints) == 1 or r.anchor == "hint"
            or all(any(p in hint for p in PIVOTS) for hint in r.hints) for h in r.hints)))
    for rule in rules:
        if use_hints and not rule.may_match(text, lowered, known):
            continue
        if not starts:  # the first rule that fires takes all its spans: they are sorted and never overlap
            for start, end in rule_spans(rule, text, aligned, located):
                starts.append(start)
                ends.append(end)
            names.extend([rule.name] * (len(starts) - len(names)))
            continue
        for start, end in rule_spans(rule, text, aligned, located):
            # Accepted spans never overlap, so their ends are sorted like their starts.
            from bisect import bisect_right  # only where two rules fire: a C extension a plain prompt never loads

            index = bisect_right(starts, start)
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

    `use_hints=False` runs every rule's pattern over the whole text: tests use it to prove that the hints,
    anchors and locators hide nothing."""
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


# No rule matches fewer characters than this (`Basic ` and 8 of base64) unless the text has `://` in it
# (URL user-info): a shorter field is returned without the table being read.
SHORTEST_CREDENTIAL = 14


def scrub(value: str | None, limit: int | None = None) -> str | None:
    """A field that comes from outside (a payload's ids, reason, paths; git's branch and file names; a remote
    URL), made safe to write: redacted like prompt text, then cut to `limit` characters if given. Every such field
    passes through here before it reaches a record, a file name, a log, stdout or stderr."""
    if value is None:
        return None
    if len(value) >= SHORTEST_CREDENTIAL or "://" in value:
        value = redact(value)[0]
    return value if limit is None else value[:limit]
