"""JSON for the hook path through the `_json` C accelerator: the same bytes as `json.dumps`, the same values as
`json.loads`, for the options majordomus uses.

`import json` costs a hook ~2 ms and pulls in `re` (and `enum` with it, ~5 ms more): the scanner and the
encoder that `json` itself calls live in `_json`, so the hook calls them directly. Anything this module does
not spell itself (a nested value in a pretty dump, a Python without `_json`) goes through `json`, imported
then and only then. A test holds every function here equal to `json` on generated values.
"""

from __future__ import annotations

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


def loads(text: str) -> Any:
    """`json.loads(text)` for a str; a ValueError (json's JSONDecodeError) when it is not one JSON value."""
    if _scan is None:  # pragma: no cover
        import json

        return json.loads(text)
    start = len(text) - len(text.lstrip(_WHITESPACE))
    try:
        found, end = _scan(text, start)
    except (StopIteration, ValueError, SystemError):
        # Not JSON: json says so, with its message. (3.11's scanner raises its JSONDecodeError only when
        # json.decoder is imported already: otherwise a SystemError, which json.loads then turns into the error.)
        import json

        return json.loads(text)
    if text[end:].strip(_WHITESPACE):
        import json

        return json.loads(text)  # "Extra data"
    return found


def _default(o: Any) -> Any:
    raise TypeError(f"Object of type {o.__class__.__name__} is not JSON serializable")


def _encoder(ensure_ascii: bool, item_separator: str, key_separator: str) -> Any:
    quote = _json.encode_basestring_ascii if ensure_ascii else _json.encode_basestring
    return _json.make_encoder({}, _default, quote, None, key_separator, item_separator, False, False, True)


_ENCODERS: dict[tuple[bool, str, str], Any] = {}


def dumps(value: Any, *, ensure_ascii: bool = True, separators: tuple[str, str] = (", ", ": ")) -> str:
    """`json.dumps(value, ensure_ascii=…, separators=…)` (no indent)."""
    if _json is None:  # pragma: no cover
        import json

        return json.dumps(value, ensure_ascii=ensure_ascii, separators=separators)
    if isinstance(value, str):  # what json.dumps does for a bare string, too
        return _json.encode_basestring_ascii(value) if ensure_ascii else _json.encode_basestring(value)
    key = (ensure_ascii, *separators)
    encode = _ENCODERS.get(key)
    if encode is None:
        encode = _ENCODERS[key] = _encoder(ensure_ascii, *separators)
    return "".join(encode(value, 0))


def compact(value: Any) -> str:
    """`json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)`: a tool result's text, and
    each fragment an `EncodedList` joins (the server's, never the hook's: `json` is imported here)."""
    import json

    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


class EncodedList(list):  # type: ignore[type-arg]  # of JSON values
    """A list that carries its own `compact` JSON in `json`, joined from fragments its maker keeps: an encoder that
    splices it never encodes the items again. Its items are shared with the maker: read them, never change them."""

    def __init__(self, items: list[Any], json: str) -> None:
        super().__init__(items)
        self.json = json


_SCALARS = (str, int, float, type(None))  # bool is an int


def dumps_pretty(members: dict[str, Any], *, ensure_ascii: bool = True) -> str:
    """`json.dumps(members, indent=2, ensure_ascii=…)` for a flat object of scalars (one member per line)."""
    if not members:
        return "{}"
    if _json is None or not all(isinstance(k, str) and isinstance(v, _SCALARS) for k, v in members.items()):
        import json

        return json.dumps(members, indent=2, ensure_ascii=ensure_ascii)
    return "{\n" + ",\n".join(f"  {dumps(k, ensure_ascii=ensure_ascii)}: {dumps(v, ensure_ascii=ensure_ascii)}"
                              for k, v in members.items()) + "\n}"
