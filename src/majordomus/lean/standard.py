"""How a stand-in gives way: the standard module itself, for a name the stand-in does not define."""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # the room's own: it makes the stand-in for `typing`
if TYPE_CHECKING:
    from typing import Any


def forwarding(name: str) -> Any:
    """A stand-in's `__getattr__`: a name it does not define is the standard module's. Never a dunder: the import
    system and `repr` ask a module for `__path__`, `__spec__`, `__file__` (a stand-in has none of its own), and
    answering those would import the standard module on every `from … import …`."""

    def missing(attribute: str) -> object:
        if attribute.startswith("__") and attribute.endswith("__"):
            raise AttributeError(attribute)
        return getattr(standard(name), attribute)

    return missing


def standard(name: str) -> Any:
    """The standard module `name` itself, in place of its stand-in from now on."""
    found = sys.modules.get(name)
    if found is not None and getattr(found, "__lean__", False):
        del sys.modules[name]
    __import__(name)
    return sys.modules[name]
