"""The stand-in for `json` in a hook (majordomus.lean says when): `loads` and `dumps` through the `_json` C
accelerator, the same values and the same bytes as the standard module's for the options the hook path uses.

Importing `json` costs a hook 8-13 ms: it pulls in `re` (and `enum` with it). The scanner and the encoder that
`json` itself calls live in `_json`, so the stand-in calls them directly. Anything it does not spell itself (a
nested value in an indented dump, other options, a Python without `_json`, any other name) is the standard
module's, imported then. A test holds every function here equal to `json` on generated values.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # the room's own (majordomus.lean)

if TYPE_CHECKING:
    from typing import Any

try:
    import _json
except ImportError:  # pragma: no cover - every CPython build has it
    _json = None  # type: ignore[assignment]

_WHITESPACE = " \t\n\r"  # what json.decoder.WHITESPACE matches
_CONSTANTS = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}


class _Context:
    """The attributes `_json.make_scanner` reads from a JSONDecoder, at json.loads' defaults."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = _CONSTANTS.__getitem__


_scan: Any = _json.make_scanner(_Context()) if _json is not None else None  # type: ignore[arg-type]


def _loads(text: str) -> Any:
    """`json.loads(text)` for a str; a ValueError (json's JSONDecodeError) when it is not one JSON value."""
    if _scan is None:  # pragma: no cover
        return _standard("json").loads(text)
    start = len(text) - len(text.lstrip(_WHITESPACE))
    try:
        found, end = _scan(text, start)
    except (StopIteration, ValueError, SystemError):
        # Not JSON: json says so, with its message. (3.11's scanner raises its JSONDecodeError only when
        # json.decoder is imported already: otherwise a SystemError, which json.loads then turns into the error.)
        return _standard("json").loads(text)
    if text[end:].strip(_WHITESPACE):
        return _standard("json").loads(text)  # "Extra data"
    return found


def _default(o: Any) -> Any:
    raise TypeError(f"Object of type {o.__class__.__name__} is not JSON serializable")


def _encoder(ensure_ascii: bool, item_separator: str, key_separator: str) -> Any:
    quote = _json.encode_basestring_ascii if ensure_ascii else _json.encode_basestring
    return _json.make_encoder({}, _default, quote, None, key_separator, item_separator, False, False, True)


_ENCODERS: dict[tuple[bool, str, str], Any] = {}


def _dumps(value: Any, *, ensure_ascii: bool = True, separators: tuple[str, str] = (", ", ": ")) -> str:
    """`json.dumps(value, ensure_ascii=…, separators=…)` (no indent)."""
    if _json is None:  # pragma: no cover
        return str(_standard("json").dumps(value, ensure_ascii=ensure_ascii, separators=separators))
    if isinstance(value, str):  # what json.dumps does for a bare string, too
        return _json.encode_basestring_ascii(value) if ensure_ascii else _json.encode_basestring(value)
    key = (ensure_ascii, *separators)
    encode = _ENCODERS.get(key)
    if encode is None:
        encode = _ENCODERS[key] = _encoder(ensure_ascii, *separators)
    return "".join(encode(value, 0))


_SCALARS = (str, int, float, type(None))  # bool is an int


def _pretty(members: dict[str, Any], *, ensure_ascii: bool = True) -> str:
    """`json.dumps(members, indent=2, ensure_ascii=…)` for a flat object of scalars (one member per line)."""
    if not members:
        return "{}"
    if _json is None or not all(isinstance(k, str) and isinstance(v, _SCALARS) for k, v in members.items()):
        return str(_standard("json").dumps(members, indent=2, ensure_ascii=ensure_ascii))
    return "{\n" + ",\n".join(f"  {_dumps(k, ensure_ascii=ensure_ascii)}: {_dumps(v, ensure_ascii=ensure_ascii)}"
                              for k, v in members.items()) + "\n}"


def loads(s: Any, **options: Any) -> Any:
    """`json.loads`: a str, with no options, here; anything else by the standard module."""
    return _loads(s) if isinstance(s, str) and not options else _standard("json").loads(s, **options)


def dumps(obj: Any, *, ensure_ascii: bool = True, separators: tuple[str, str] | None = None,
          indent: int | None = None, **options: Any) -> str:
    """`json.dumps`: no indent (any separators), or an indent of 2 for a flat object, here; else by the standard
    module."""
    if not options and indent is None:
        return _dumps(obj, ensure_ascii=ensure_ascii, separators=separators or (", ", ": "))
    if not options and indent == 2 and separators is None and isinstance(obj, dict):
        return _pretty(obj, ensure_ascii=ensure_ascii)
    return str(_standard("json").dumps(obj, ensure_ascii=ensure_ascii, separators=separators, indent=indent,
                                       **options))


def _standard(name: str) -> Any:
    """The standard module (stand_in sets majordomus.lean's, which first takes the stand-in out of the way)."""
    __import__(name)
    return sys.modules[name]


def stand_in(forwarding: Any, standard: Any) -> Any:
    """The module a hook takes for `json` (`forwarding` and `standard` are majordomus.lean's)."""
    global _standard
    _standard = standard
    made: Any = type(sys)("json")
    made.loads, made.dumps = loads, dumps
    made.__lean__ = True
    made.__getattr__ = forwarding
    return made
