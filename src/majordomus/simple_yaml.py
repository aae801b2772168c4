"""The small YAML majordomus writes and reads itself: `key: value` lines with JSON-spelled scalars, and front matter.

JSON scalars are valid YAML, so a YAML reader and this stdlib reader agree. Stdlib only: the hook path
writes open files, records and renderings with this; PyYAML is only for the policy.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

# [\x7f-\x9f\u2028\u2029\ud800-\udfff\ufffe\uffff] (JSON escapes the C0 set itself) without `re` on the hook path:
# a small set, and the surrogates, which are what strict UTF-8 cannot encode
ESCAPE_BMP = frozenset([*map(chr, range(0x7F, 0xA0)), "\u2028", "\u2029", "\ufffe", "\uffff"])


def has_surrogate(text: str) -> bool:
    """A lone surrogate (U+D800-U+DFFF) in the text: the one thing strict UTF-8 refuses to encode."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _escaped(ch: str) -> bool:
    return ch in ESCAPE_BMP or "\ud800" <= ch <= "\udfff"


def yaml_scalar(value: Any) -> str:
    """A YAML scalar that reads back as the same value: JSON's spelling (null, numbers, double quotes).

    JSON leaves a few characters raw that YAML refuses (C1 controls, U+FFFE) or folds as line breaks
    (NEL, U+2028, U+2029): those become `\\uXXXX` escapes, which both languages read the same way.
    """
    text = json.dumps(value, ensure_ascii=False)
    if not isinstance(value, str) or (value.isascii() and "\x7f" not in value):
        return text
    if ESCAPE_BMP.isdisjoint(text) and not has_surrogate(text):
        return text
    return "".join(f"\\u{ord(ch):04x}" if _escaped(ch) else ch for ch in text)


def yaml_lines(fields: Iterable[tuple[str, Any]]) -> list[str]:
    """`key: value` lines; a list becomes a block list (or `[]`), everything else a JSON scalar."""
    out: list[str] = []
    for key, item in fields:
        if isinstance(item, list):
            if not item:
                out.append(f"{key}: []")
            else:
                out.append(f"{key}:")
                out.extend(f"  - {yaml_scalar(element)}" for element in item)
        else:
            out.append(f"{key}: {yaml_scalar(item)}")
    return out


def parse_simple_yaml(text: str) -> dict[str, Any]:
    """Read what `yaml_lines` wrote (and plain unquoted scalars). Unknown shapes are skipped, not fatal."""
    out: dict[str, Any] = {}
    current: str | None = None
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#") or line.strip() == "---":
            continue
        if line.startswith("  - ") and current is not None and isinstance(out.get(current), list):
            out[current].append(_scalar(line[4:]))
            continue
        key, sep, rest = line.partition(":")
        if not sep or line.startswith(" "):
            continue
        rest = rest.strip()
        current = key.strip()
        out[current] = [] if rest in ("", "[]") else _scalar(rest)
    return out


def _scalar(text: str) -> Any:
    text = text.strip()
    try:
        return json.loads(text)
    except ValueError:
        if len(text) >= 2 and text[0] == text[-1] == "'":
            return text[1:-1].replace("''", "'")
        return text


def front_matter(text: str) -> dict[str, Any]:
    """The YAML between the first two `---` lines of a Markdown file."""
    if not text.startswith("---\n"):
        return {}
    end = text.find("\n---", 4)
    return parse_simple_yaml(text[4:end]) if end != -1 else {}
