"""The server's JSON fragments: a list that carries its own compact JSON, so an encoder that splices it never encodes
its items again (the board's episodes, the capabilities' answers)."""

from __future__ import annotations

import json
from typing import Any


def compact(value: Any) -> str:
    """`json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)`: a tool result's text, and
    each fragment an `EncodedList` joins."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


class EncodedList(list):  # type: ignore[type-arg]  # of JSON values
    """A list that carries its own `compact` JSON in `json`, joined from fragments its maker keeps: an encoder that
    splices it never encodes the items again. Its items are shared with the maker: read them, never change them."""

    def __init__(self, items: list[Any], json: str) -> None:
        super().__init__(items)
        self.json = json
