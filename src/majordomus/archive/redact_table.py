"""Compiles the credential table: `redact_rules.yaml`, the source a person edits, into `redact_rules.json`.

The hook path (`redact.py`) reads only the JSON, with stdlib json; PyYAML is imported here, never there.
`python -m majordomus.archive.redact_table --write` regenerates the JSON; `--check [redact_rules.yaml]`
exits 10 when the source is malformed or the JSON is stale. A test holds them equal.

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

from majordomus.archive.redact import Rule, _is_placeholder  # stdlib only: what redact() applies

HERE = Path(__file__).parent
YAML_PATH = HERE / "redact_rules.yaml"
JSON_PATH = HERE / "redact_rules.json"

MAX_LINE = 200
PARTS = ("prefix", "guard", "body", "end")
KEYS = frozenset({"name", *PARTS, "hints", "examples", "near_misses", "generator", "words"})
WORD_LISTS = ("names", "compounds", "not_secret", "operators", "references", "extension_lengths")
_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")

# The fixed pieces of the assignment rule; what varies (the words) lives in the source.
_QUOTE = r"""[\"'`]"""  # a quote, as the pattern spells it
_HINT_QUOTE = r"""["'`]"""  # the same, as the hint spells it
_NAME_RUN = r"(?<![A-Za-z0-9_.-])[A-Za-z0-9_.-]{1,64}+"
_SPACE = r"[ \t]{0,16}+"
_HINT_SPACE = r"[ \t]{0,16}"
_QUOTED_START = r"(?<=[\"'`])(?![$.{<%(\[*])"
_QUOTED_VALUE = (r"(?=[^\"'`\\\s0-9]{0,4095}[0-9])(?=[^\"'`\\\sA-Za-z]{0,4095}[A-Za-z])"
                 r"(?![^\"'`\\\s]{0,4092}?(?:\.\.\.|[xX]{4}|\*{4}))[^\"'`\\\s]{16,4096}+(?=[\"'`\\\r\n]|\Z)")
_BARE_START = r"(?<![\"'`])(?![$.])"
_BARE_VALUE = (r"(?=[A-Za-z+/_~%.-]{0,4095}[0-9])(?=[0-9+/_~%.-]{0,4095}[A-Za-z])"
               r"(?![A-Za-z0-9+/_~%.-]{0,4092}?(?:\.\.\.|[xX]{4}))"
               r"(?:[A-Za-z0-9+/_~%-]|\.(?=[A-Za-z0-9+/_~%-])){16,4096}+"
               r"={0,3}(?![A-Za-z0-9+/_~%=(\[{…-]|\.\.)")
_HINT_VALUE = r"""[^"'`\\\s]{16}"""


class TableError(ValueError):
    """The source is malformed; the message is one sentence that says where and why."""


def _ci(word: str) -> str:
    return f"(?i:{re.escape(word)})"


def _operator(operators: list[str]) -> str:
    """Longer operators as alternatives, one-character ones in a class: `(?:=>|:=|[:=>,])`."""
    long = [re.escape(op) for op in operators if len(op) > 1]
    short = "".join(op for op in operators if len(op) == 1)
    return "(?:" + "|".join([*long, f"[{short}]"]) + ")"


def _folded(words: list[str]) -> str:
    """`pass, password, passwd` -> `pass(?:word|wd)?`: each word joins the shortest listed word it starts with,
    in order of first appearance, so the alternation stays readable and matches exactly the listed words."""
    groups: dict[str, list[str]] = {}
    for word in words:
        stem = min((s for s in words if word.startswith(s)), key=len)
        groups.setdefault(stem, []).append(word[len(stem):])
    pieces = []
    for stem, tails in groups.items():
        rest = [re.escape(t) for t in tails if t]
        if not rest:
            pieces.append(re.escape(stem))
        elif len(rest) == 1 and len(rest[0]) == 1:
            pieces.append(f"{re.escape(stem)}{rest[0]}?")
        else:
            pieces.append(f"{re.escape(stem)}(?:{'|'.join(rest)})?")
    return "(?:" + "|".join(pieces) + ")"


def assignment_pattern(words: dict[str, Any]) -> str:
    """`NAME <op> VALUE` where NAME ends in a credential word and VALUE looks random; only VALUE is the secret."""
    names: list[str] = words["names"]
    operator = _operator(words["operators"])
    separator = rf"\\?{_QUOTE}?{_SPACE}{operator}"
    endings = [f"(?<={_ci(w)})(?<![A-Za-z0-9]{_ci(w)})" for w in [*names, *words["compounds"]]]
    endings += [f"(?<=[a-z0-9]{re.escape(w.capitalize())})" for w in names]
    excluded = "".join(f"(?<!{_ci(p)}[_.-]{_ci(w)})(?<!{_ci(p)}{re.escape(w.capitalize())})"
                       for w, prefixes in words["not_secret"].items() for p in prefixes)
    reference = "(?!(?i:" + "|".join(re.escape(r) for r in words["references"]) + "))"
    no_file = "".join(rf"(?<!\.[A-Za-z]{{{n}}})" for n in words["extension_lengths"])
    quoted = _QUOTED_START + reference + _QUOTED_VALUE + no_file
    bare = _BARE_START + reference + _BARE_VALUE + no_file
    return (f"{_NAME_RUN}(?={separator})(?:{'|'.join(endings)}){excluded}"
            f"{separator}{_SPACE}(?:\\\\?{_QUOTE})?(?P<secret>{quoted}|{bare})")


def assignment_hint(words: dict[str, Any]) -> str:
    """A `/regex/` every assignment match contains: a credential word, an operator, 16 value characters."""
    operator = _operator(words["operators"])
    return (f"/{_folded(words['names'])}\\\\?{_HINT_QUOTE}?{_HINT_SPACE}{operator}{_HINT_SPACE}"
            f"(?:\\\\?{_HINT_QUOTE})?{_HINT_VALUE}/")


GENERATORS = {"assignment": (assignment_pattern, assignment_hint)}


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


def _spans(pattern: re.Pattern[str], text: str) -> list[tuple[int, int]]:
    group = "secret" if "secret" in pattern.groupindex else 0
    spans = [m.span(group) for m in pattern.finditer(text)]
    return [(s, e) for s, e in spans if s < e and not _is_placeholder(text[s:e])]


def _rule(raw: Any, number: int) -> dict[str, Any]:
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
        raise TableError(f"rule {number} has no name; every rule is a mapping with a `name`")
    name: str = raw["name"]
    if not _NAME.fullmatch(name):
        raise TableError(f"rule {name!r}: the name is not lowercase-hyphenated")
    unknown = sorted(set(raw) - KEYS)
    if unknown:
        raise TableError(f"rule {name!r}: unknown key(s) {', '.join(unknown)}")
    if raw.get("generator") is not None:
        if raw["generator"] not in GENERATORS or any(k in raw for k in (*PARTS, "hints")):
            raise TableError(f"rule {name!r}: a generated rule names a known generator ({', '.join(GENERATORS)}) "
                             "and has words, not parts or hints")
        words = raw.get("words")
        if not isinstance(words, dict) or set(words) != set(WORD_LISTS):
            raise TableError(f"rule {name!r}: its words are exactly {', '.join(WORD_LISTS)}")
        build, hint = GENERATORS[raw["generator"]]
        pattern, hints = build(words), [hint(words)]
    else:
        if "body" not in raw:
            raise TableError(f"rule {name!r} has no body; a rule is prefix, guard, body and end, or a generator")
        pattern = "".join("".join(_strings(name, part, raw[part])) for part in PARTS if part in raw)
        hints = _strings(name, "hints", raw.get("hints", []))
    if any(h != h.lower() for h in hints if not h.startswith("/")):
        raise TableError(f"rule {name!r}: its hints must be lowercase")
    try:
        compiled = re.compile(pattern)
    except re.error as error:
        raise TableError(f"rule {name!r}: its pattern is not a valid regular expression ({error})") from None
    examples = [_example(name, e) for e in raw.get("examples") or []]
    if not examples:
        raise TableError(f"rule {name!r} has no examples; every rule needs at least one text it must redact")
    rule = Rule(name=name, source=pattern, sample=examples[0]["text"], hints=tuple(hints))
    for example in examples:
        text, secret = example["text"], example["secret"]
        start = text.index(secret)
        if (start, start + len(secret)) not in _spans(compiled, text):
            raise TableError(f"rule {name!r}: the example {text!r} does not match its pattern at {secret!r}")
        if not rule.may_match(text, text.lower()):
            raise TableError(f"rule {name!r}: the example {text!r} contains none of its hints")
    near_misses = _strings(name, "near_misses", raw.get("near_misses", []))
    for text in near_misses:
        if _spans(compiled, text):
            raise TableError(f"rule {name!r}: the near-miss {text!r} matches its pattern")
    return {"name": name, "pattern": pattern, "hints": hints, "examples": examples, "near_misses": near_misses}


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
    patterns = [(r["name"], re.compile(r["pattern"])) for r in rules]
    for rule in rules:
        for text in rule["near_misses"]:
            other = next((name for name, pattern in patterns if _spans(pattern, text)), None)
            if other is not None:
                raise TableError(f"rule {rule['name']!r}: the near-miss {text!r} matches rule {other!r}")
    return {"version": 1, "rules": rules}


def json_text(table: dict[str, Any]) -> str:
    return json.dumps(table, indent=1, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    if argv == ["--write"]:
        JSON_PATH.write_text(json_text(compile_source(YAML_PATH.read_text(encoding="utf-8"))), encoding="utf-8")
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
        return 0
    print("usage: python -m majordomus.archive.redact_table --write | --check [redact_rules.yaml]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
