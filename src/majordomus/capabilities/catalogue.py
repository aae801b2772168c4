"""The registry this product ships: every capability module's declarations, in one order.

Above `registry`, `episodes`, `peers` and `history`: it is the one place that knows them all.
"""

from __future__ import annotations

from majordomus.capabilities import episodes, history, peers
from majordomus.capabilities.registry import Registry

_default: Registry | None = None


def default_registry() -> Registry:
    """Episodes, then peers, then the recorded history, in declaration order; built once per process."""
    global _default
    if _default is None:
        _default = Registry([*episodes.CAPABILITIES, *peers.CAPABILITIES, *history.CAPABILITIES])
    return _default
