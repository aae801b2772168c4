"""Compiles the credential table: `redact_rules.yaml`, the source a person edits, into `redact_rules.json` (the
proved table, examples and near-misses included) and `majordomus/redact_rules.py` (the rows the hook applies).

The hook path (`redact.py`) imports only the generated module, whose bytecode is cached: parsing the 44 KB of
JSON cost every prompt about 0.4 ms. PyYAML is imported here, never there.
`python -m majordomus.archive.redact_table --write` regenerates both; `--check [redact_rules.yaml]`
exits 10 when the source is malformed or either is stale. A test holds them equal.

A rule's pattern is its parts joined (prefix, guard, body, end), or, for `generator: assignment`, built by
`assignment_pattern` from its word lists, whose hint `assignment_hint` derives from the same lists.
Every rule is proved on load: each example is redacted by its own pattern at the right span, no near-miss is.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from majordomus.redact import CHECKS, Rule, _parse_rules, rule_spans  # stdlib only: what redact() applies

HERE = Path(__file__).parent
YAML_PATH = HERE / "redact_rules.yaml"
JSON_PATH = HERE / "redact_rules.json"
MODULE_PATH = HERE.parent / "redact_rules.py"

MAX_LINE = 200
PARTS = ("prefix", "guard", "body", "end")
KEYS = frozenset({"name", *PARTS, "hints", "anchor", "locate", "check", "examples", "near_misses", "generator",
                  "words"})
ANCHORS = ("", "hint", "name")
WORD_LISTS = ("names", "compounds", "not_secret", "operators", "references", "extension_lengths")
_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")

# The fixed pieces of the assignment rules; what varies (the words) lives in the source.
_QUOTE = r"""[\"'`]"""  # a quote, as the pattern spells it
_LOCATE_QUOTE = r"""["'`]"""  # the same, as a locator spells it
_NAME_RUN = r"[A-Za-z0-9_.-]{1,64}+"
_SPACE = r"[ \t]{0,16}+"
_QUOTED_START = r"(?<=[\"'`])(?![$.{<%(\[*])"
# A value needs a letter; one without a digit or a shell-special character must also look random, which
# redact._opaque decides (a pattern cannot measure entropy).
_QUOTED_VALUE = (r"(?=[^\"'`\\\sA-Za-z]{0,4095}[A-Za-z])"
                 r"(?![^\"'`\\\s]{0,4092}?(?:\.\.\.|[xX]{4}|\*{4}))[^\"'`\\\s]{16,4096}+(?=[\"'`\\\r\n]|\Z)")
_BARE = "A-Za-z0-9+/_~%$*!#^-"  # shell-special characters included: `REDIS_PASSWORD=Zq$9*...` is one value
_BARE_START = r"(?<![\"'`])(?![$.])"
_BARE_VALUE = (rf"(?=[0-9+/_~%.$*!#^-]{{0,4095}}[A-Za-z])"
               rf"(?![.{_BARE}]{{0,4092}}?(?:\.\.\.|[xX]{{4}}|\*{{4}}))"
               rf"(?:[{_BARE}]|\.(?=[{_BARE}])){{16,4096}}+"
               rf"={{0,3}}(?![=(\[{{…{_BARE}]|\.\.)")
# What a locator requires of a value's first 16 characters (lowercased text): quoted, or bare.
_QUOTED_CHARS = r"""[^\s"'`\\]"""
_BARE_CHARS = f"[.{_BARE.replace('A-Za-z', 'a-z')}]"
_STRONG = "[0-9!#$%^&*@]"  # as redact._STRONG: a value with one needs no more evidence
# What a locator requires of a value (lowercased text): quoted or bare, 16 characters, and either a digit or
# shell-special character, or 20 characters counting a bare value's `=` padding, as redact._opaque counts them
# (it rejects anything else, so it is not tried).
_LOCATE_VALUE = (rf"""(?:\\?{_LOCATE_QUOTE}(?={_QUOTED_CHARS}{{16}})"""
                 rf"(?:{_QUOTED_CHARS}{{0,4095}}{_STRONG}|{_QUOTED_CHARS}{{20}})"
                 rf"|(?={_BARE_CHARS}{{16}})(?:{_BARE_CHARS}{{0,4095}}{_STRONG}|(?:{_BARE_CHARS}|=){{20}}))")
# Between a name and its `value` field, in XML attributes, JSON members and YAML lists.
_PAIR_GAP = r"""[\"']?[ \t]{0,16}+[,;]?[ \t\r\n]{0,64}+[\"']?(?i:value)[\"']?[ \t]{0,16}+[:=]"""
_LOCATE_PAIR_GAP = r"""["']?[ \t]{0,16}+[,;]?[ \t\r\n]{0,64}+["']?value["']?[ \t]{0,16}+[:=][ \t]{0,16}+"""


class TableError(ValueError):
    """The source is malformed; the message is one sentence that says where and why."""


def _ci(word: str) -> str:
    return f"(?i:{re.escape(word)})"


def _operator(operators: list[str]) -> str:
    """Longer operators as alternatives, one-character ones in a class: `(?:=>|:=|[:=>,])`."""
    long = [re.escape(op) for op in operators if len(op) > 1]
    short = "".join(op for op in operators if len(op) == 1)
    return "(?:" + "|".join([*long, f"[{short}]"]) + ")"


def _stems(words: list[str]) -> dict[str, list[str]]:
    """`pass, password, passwd` -> {pass: ["", word, wd]}: each word joins the shortest listed word it starts
    with, in order of first appearance."""
    groups: dict[str, list[str]] = {}
    for word in words:
        stem = min((s for s in words if word.startswith(s)), key=len)
        groups.setdefault(stem, []).append(word[len(stem):])
    return groups


def _stem_pattern(stem: str, tails: list[str]) -> str:
    rest = [re.escape(t) for t in tails if t]
    if not rest:
        return re.escape(stem)
    if len(rest) == 1 and len(rest[0]) == 1:
        return f"{re.escape(stem)}{rest[0]}?"
    return f"{re.escape(stem)}(?:{'|'.join(rest)})?"


def _excluded(word: str, prefixes: list[str]) -> str:
    """`(?<!(?i:cache|range)[_.-](?i:key))(?<!(?i:cache|range)Key)`…: the `not_secret` compounds of one word,
    one look-behind per prefix length (a look-behind's alternatives must be of one width)."""
    by_length: dict[int, list[str]] = {}
    for prefix in prefixes:
        by_length.setdefault(len(prefix), []).append(prefix)
    pieces = []
    for group in by_length.values():
        alternatives = "|".join(re.escape(p) for p in group)
        pieces.append(f"(?<!(?i:{alternatives})[_.-]{_ci(word)})(?<!(?i:{alternatives}){re.escape(word.capitalize())})")
    return "".join(pieces)


def _name_checks(words: dict[str, Any]) -> str:
    """After a name run: it ends in a credential word (a whole component, or camelCase) and is not a
    `not_secret` compound of that word such as cache_key or pageToken."""
    names: list[str] = words["names"]
    exclusions = {w: _excluded(w, prefixes) for w, prefixes in words["not_secret"].items()}
    endings = [f"(?<={_ci(w)})(?<![A-Za-z0-9]{_ci(w)}){exclusions.get(w, '')}" for w in names]
    endings += [f"(?<={_ci(w)})(?<![A-Za-z0-9]{_ci(w)})" for w in words["compounds"]]
    endings += [f"(?<=[a-z0-9]{re.escape(w.capitalize())}){exclusions.get(w, '')}" for w in names]
    return f"(?:{'|'.join(endings)})"


def _value(words: dict[str, Any]) -> str:
    reference = "(?!(?i:" + "|".join(re.escape(r) for r in words["references"]) + "))"
    no_file = "".join(rf"(?<!\.[A-Za-z]{{{n}}})" for n in words["extension_lengths"])
    quoted = _QUOTED_START + reference + _QUOTED_VALUE + no_file
    bare = _BARE_START + reference + _BARE_VALUE + no_file
    return f"(?:\\\\?{_QUOTE})?(?P<secret>{quoted}|{bare})"


def assignment_pattern(words: dict[str, Any]) -> str:
    """`NAME <op> VALUE` where NAME ends in a credential word and VALUE looks opaque; only VALUE is the secret."""
    separator = rf"\\?{_QUOTE}?{_SPACE}{_operator(words['operators'])}"
    return (f"(?<![A-Za-z0-9_.-]){_NAME_RUN}(?={separator}){_name_checks(words)}"
            f"{separator}{_SPACE}{_value(words)}")


def assignment_locate(words: dict[str, Any]) -> list[str]:
    """One locator per word stem, over the lowercased text: the word, then an operator and 16 value characters
    (assignment) or a `value` field (pair). Each starts with a literal, so `re` skips to it; every match of
    either rule ends its name where one ends. Both rules have these same locators, and share one scan."""
    operator = _operator(words["operators"])
    # A gate first, implied by the look-ahead after it (so it changes no match) and cheap in `re`: the operator as
    # a run of its characters, then a quote or 16 value characters; or a `value` field, once the next character
    # can start one. Dense text of a word that is no assignment (`key=` x 250k) then costs one short try each.
    signs = "".join(sorted({ch for op in words["operators"] for ch in op}))
    gate = (rf"""(?=\\?{_LOCATE_QUOTE}?{_SPACE}[{re.escape(signs)}]{{1,{max(map(len, words["operators"]))}}}"""
            rf"""{_SPACE}(?:[\\"'`]|{_BARE_CHARS}{{16}})|(?=["' \t,;\r\nv]){_LOCATE_PAIR_GAP})""")
    look = (rf"""(?=[\\"'`\t :=>,?;\r\n]){gate}(?=\\?{_LOCATE_QUOTE}?{_SPACE}{operator}{_SPACE}{_LOCATE_VALUE}"""
            rf"|{_LOCATE_PAIR_GAP}{_LOCATE_VALUE})")
    return [_stem_pattern(stem, tails) + look for stem, tails in _stems(words["names"]).items()]


def pair_pattern(words: dict[str, Any]) -> str:
    """A name and its value in two fields: `<add key="StorageAccountKey" value="…"/>`,
    `{"name": "api_key", "value": "…"}`, `- name: API_TOKEN` / `value: …`; only the value is the secret."""
    return (rf"""(?<=[\"'\s]){_NAME_RUN}(?={_PAIR_GAP}){_name_checks(words)}{_PAIR_GAP}{_SPACE}{_value(words)}""")


GENERATORS = {"assignment": (assignment_pattern, assignment_locate), "pair": (pair_pattern, assignment_locate)}


def _example(rule: str, raw: Any) -> dict[str, str]:
    if isinstance(raw, str):
        return {"text": raw, "secret": raw}
    if isinstance(raw, dict) and set(raw) == {"text", "secret"} and all(isinstance(v, str) for v in raw.values()):
        if raw["secret"] not in raw["text"]:
            raise TableError(f"rule {rule!r}: the secret {raw['secret']!r} is not part of its example text")
        return {"text": raw["text"], "secret": raw["secret"]}
    raise TableError(f"rule {rule!r}: an example is a string or {{text, secret}}, not {raw!r}")


def _strings(rule: str, key: str, raw: Any) -> list[str]:
    items = [raw] if isinstance(raw, str) else raw
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        raise TableError(f"rule {rule!r}: {key} is a string or a list of strings")
    return items


def _spans(rule: Rule, text: str) -> list[tuple[int, int]]:
    """The spans the rule replaces, found both ways: by its pattern over the whole text, and the way the
    hook finds them (hints, anchor, locators). A row is proved only when the two agree."""
    scanned = list(rule_spans(rule, text))
    lowered = text.lower()
    fast = list(rule_spans(rule, text, lowered)) if rule.may_match(text, lowered) else []
    if fast != scanned:
        raise TableError(f"rule {rule.name!r}: its hints, anchor or locators miss a match in {text!r}")
    return scanned


def _rule(raw: Any, number: int) -> dict[str, Any]:
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
        raise TableError(f"rule {number} has no name; every rule is a mapping with a `name`")
    name: str = raw["name"]
    if not _NAME.fullmatch(name):
        raise TableError(f"rule {name!r}: the name is not lowercase-hyphenated")
    unknown = sorted(set(raw) - KEYS)
    if unknown:
        raise TableError(f"rule {name!r}: unknown key(s) {', '.join(unknown)}")
    anchor = raw.get("anchor", "")
    check = raw.get("check", "")
    locate: list[str] = []
    if raw.get("generator") is not None:
        if raw["generator"] not in GENERATORS or any(k in raw for k in (*PARTS, "hints", "anchor")):
            raise TableError(f"rule {name!r}: a generated rule names a known generator ({', '.join(GENERATORS)}) "
                             "and has words, not parts, hints or an anchor")
        words = raw.get("words")
        if not isinstance(words, dict) or set(words) != set(WORD_LISTS):
            raise TableError(f"rule {name!r}: its words are exactly {', '.join(WORD_LISTS)}")
        build, locator = GENERATORS[raw["generator"]]
        pattern, anchor, locate = build(words), "name", locator(words)
        # a short text (a hook's prompt) without any credential word, or without `value` for a pair, skips the
        # rule: neither its locators nor its pattern are compiled; a long one is located directly
        hints = ["value"] if raw["generator"] == "pair" else list(_stems(words["names"]))
    else:
        if "body" not in raw:
            raise TableError(f"rule {name!r} has no body; a rule is prefix, guard, body and end, or a generator")
        pattern = "".join("".join(_strings(name, part, raw[part])) for part in PARTS if part in raw)
        hints = _strings(name, "hints", raw.get("hints", []))
        locate = _strings(name, "locate", raw.get("locate", []))
        if locate and (anchor != "hint" or not all(source[:1].islower() for source in locate)):
            raise TableError(f"rule {name!r}: a locator belongs to a rule anchored at its hints, and starts with "
                             "the lowercase literal of a hint (it runs over the lowercased text)")
    if anchor not in ANCHORS or (anchor == "hint" and not hints):
        raise TableError(f"rule {name!r}: anchor is `hint` (every match starts at a hint) or absent")
    if check and check not in CHECKS:
        raise TableError(f"rule {name!r}: check is one of {', '.join(CHECKS)}")
    if any(h != h.lower() or not h for h in hints):
        raise TableError(f"rule {name!r}: its hints must be lowercase")
    try:
        re.compile(pattern)
        for source in locate:
            re.compile(source)
    except re.error as error:
        raise TableError(f"rule {name!r}: its pattern is not a valid regular expression ({error})") from None
    examples = [_example(name, e) for e in raw.get("examples") or []]
    if not examples:
        raise TableError(f"rule {name!r} has no examples; every rule needs at least one text it must redact")
    rule = Rule(name=name, source=pattern, sample=examples[0]["text"], hints=tuple(hints), anchor=anchor,
                locate=tuple(locate), check=check)
    for example in examples:
        text, secret = example["text"], example["secret"]
        start = text.index(secret)
        if not rule.may_match(text, text.lower()):
            raise TableError(f"rule {name!r}: the example {text!r} contains none of its hints")
        if (start, start + len(secret)) not in _spans(rule, text):
            raise TableError(f"rule {name!r}: the example {text!r} does not match its pattern at {secret!r}")
    near_misses = _strings(name, "near_misses", raw.get("near_misses", []))
    for text in near_misses:
        if _spans(rule, text):
            raise TableError(f"rule {name!r}: the near-miss {text!r} matches its pattern")
    compiled: dict[str, Any] = {"name": name, "pattern": pattern, "hints": hints}
    compiled.update({k: v for k, v in (("anchor", anchor), ("locate", locate), ("check", check)) if v})
    return {**compiled, "examples": examples, "near_misses": near_misses}


def compile_source(text: str) -> dict[str, Any]:
    """The JSON table for a YAML source; raises TableError with one sentence on malformed source."""
    import yaml

    for number, line in enumerate(text.splitlines(), start=1):
        if len(line) > MAX_LINE:
            raise TableError(f"line {number} is {len(line)} characters long; no line may exceed {MAX_LINE}")
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise TableError(f"the source is not valid YAML ({error})") from None
    if not isinstance(raw, dict) or raw.get("version") != 1 or not isinstance(raw.get("rules"), list):
        raise TableError("the source is a mapping with `version: 1` and a list of `rules`")
    rules: list[dict[str, Any]] = []
    for number, item in enumerate(raw["rules"], start=1):
        rule = _rule(item, number)
        if any(r["name"] == rule["name"] for r in rules):
            raise TableError(f"rule {rule['name']!r} is a duplicate name; each rule name appears once")
        rules.append(rule)
    parsed = _parse_rules({"rules": rules})
    for rule in rules:
        for text in rule["near_misses"]:
            other = next((r.name for r in parsed if _spans(r, text)), None)
            if other is not None:
                raise TableError(f"rule {rule['name']!r}: the near-miss {text!r} matches rule {other!r}")
    return {"version": 1, "rules": rules}


def json_text(table: dict[str, Any]) -> str:
    return json.dumps(table, indent=1, ensure_ascii=False) + "\n"


RUNTIME_FIELDS = ("name", "pattern", "sample", "hints", "anchor", "locate", "check")  # Rule's order of fields


def module_text(table: dict[str, Any]) -> str:
    """`redact_rules.py` for a compiled table: one tuple per rule, in RUNTIME_FIELDS order (the sample is the
    rule's first example), each value a Python literal."""
    rows = []
    for rule in table["rules"]:
        values = {**rule, "sample": rule["examples"][0]["text"], "hints": tuple(rule["hints"]),
                  "locate": tuple(rule.get("locate", ())), "anchor": rule.get("anchor", ""),
                  "check": rule.get("check", "")}
        rows.append("    (\n" + "".join(f"        {values[f]!r},\n" for f in RUNTIME_FIELDS) + "    ),\n")
    return ('"""The credential table\'s rows as the hook applies them, generated from archive/redact_rules.yaml by\n'
            "`python -m majordomus.archive.redact_table --write`: do not edit (a test holds it to the table).\n\n"
            "A module, not JSON: its bytecode is cached, so a prompt loads the table without parsing it.\n"
            f"Each row: {', '.join(RUNTIME_FIELDS)}.\n" + '"""\n\n'
            "RULES = (\n" + "".join(rows) + ")\n")


def main(argv: list[str]) -> int:
    if argv == ["--write"]:
        table = compile_source(YAML_PATH.read_text(encoding="utf-8"))
        JSON_PATH.write_text(json_text(table), encoding="utf-8")
        MODULE_PATH.write_text(module_text(table), encoding="utf-8")
        return 0
    if argv[:1] == ["--check"] and len(argv) <= 2:
        source = Path(argv[1]) if len(argv) == 2 else YAML_PATH
        try:
            table = compile_source(source.read_text(encoding="utf-8"))
        except TableError as error:
            print(f"majordomus: {source.name}: {error}", file=sys.stderr)
            return 10
        if len(argv) == 1 and JSON_PATH.read_text(encoding="utf-8") != json_text(table):
            print("majordomus: redact_rules.json is stale; "
                  "run python -m majordomus.archive.redact_table --write", file=sys.stderr)
            return 10
        if len(argv) == 1 and MODULE_PATH.read_text(encoding="utf-8") != module_text(table):
            print("majordomus: majordomus/redact_rules.py is stale; "
                  "run python -m majordomus.archive.redact_table --write", file=sys.stderr)
            return 10
        return 0
    print("usage: python -m majordomus.archive.redact_table --write | --check [redact_rules.yaml]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
