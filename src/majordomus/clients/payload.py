"""A client's hook payload: read from stdin, parsed into one object, and its fields read by one rule.

Stdlib only: both hook commands read their payloads with this. Sentences name shapes and sizes, never values.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

# a hook's payload is small (a 10 MB transcript field still fits); past this it is logged, not parsed
PAYLOAD_LIMIT = 16 * 1024 * 1024


class Malformed(Exception):
    """A payload that cannot be read as one JSON object; the message names its shape, never its values."""


def read_stdin() -> bytes:
    """Up to one byte past the limit, so `parse_payload` can tell an over-long payload from a full one."""
    if sys.stdin is None or sys.stdin.isatty():
        return b""
    return sys.stdin.buffer.read(PAYLOAD_LIMIT + 1)


def json_kind(value: object) -> str:
    """JSON's own name for a value's type: `object`, `array`, `string`, `number`, `boolean`, `null`."""
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null",
            int: "number", float: "number"}.get(type(value), type(value).__name__)


def parse_payload(raw: bytes, *, empty: bool = False) -> dict[str, Any]:
    """The payload object; `empty` admits blank input as `{}`. Raises Malformed with a sentence."""
    if len(raw) > PAYLOAD_LIMIT:
        raise Malformed(f"the payload is over {PAYLOAD_LIMIT // (1024 * 1024)} MiB; not read")
    if not raw.strip():
        if empty:
            return {}
        raise Malformed("the payload is empty")
    try:
        found = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise Malformed(f"the payload is not UTF-8 ({len(raw)} bytes)") from None
    except ValueError:
        raise Malformed(f"the payload is not JSON ({len(raw)} bytes)") from None
    if not isinstance(found, dict):
        raise Malformed(f"the payload is a JSON {json_kind(found)}, not an object")
    return found


ABSENT: Any = object()  # what `field` returns for a key the payload does not have, unless told otherwise


def field(data: dict[str, Any], key: str, default: Any = None) -> Any:
    """The value at `key`; a dotted key (`tool_info.user_prompt`) walks nested objects, one name per dot.

    A row names a nested field this way (Windsurf, Cline); a plain key costs one dict lookup, as before.
    """
    if "." not in key:
        return data.get(key, default)
    node: Any = data
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


def first_scalar(data: dict[str, Any], keys: tuple[str, ...]) -> str | None:
    """The first of `keys` (dotted keys follow nested objects) holding a non-blank string or a number;
    anything else counts as absent. A string is redacted (majordomus.redact.scrub): an id or a reason ends up
    in file names, records, logs and reports, and a client may put anything in it."""
    for key in keys:
        found = field(data, key)
        if isinstance(found, str) and found.strip():
            from majordomus.redact import scrub

            return scrub(found.strip())
        if isinstance(found, int) and not isinstance(found, bool):
            return str(found)
    return None
