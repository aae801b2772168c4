"""Reading fields of a client's hook payload: one rule for every key an adapter row names.

Stdlib only: the hook path reads payloads with this.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def first_scalar(data: dict[str, Any], keys: tuple[str, ...]) -> str | None:
    """The first of `keys` holding a non-blank string or a number; anything else counts as absent."""
    for key in keys:
        found = data.get(key)
        if isinstance(found, str) and found.strip():
            return found.strip()
        if isinstance(found, int) and not isinstance(found, bool):
            return str(found)
    return None
