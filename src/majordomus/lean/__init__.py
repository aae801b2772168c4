"""The hook's fast path: every start-up saving of majordomus is in this one room, and only here.

A coding client runs a hook on every prompt a person submits, so its start is a product feature. The launcher
(`majordomus_hook`) starts the interpreter as `python -IS` and calls `enter()` before it imports majordomus: where
the standard library's `os`, `pathlib` and `typing` are not loaded yet (under `-IS` none is), their stand-ins from
this room are registered under those names. Every other module of majordomus imports them as anywhere
(`import os`, `from pathlib import Path`, `from typing import TYPE_CHECKING`) and gets, in a hook, the stand-in;
in every other command, the server and the tests, the standard module itself.

The rule at this door: a stand-in answers as its standard module does for what it defines (tests/hook_path holds
each to the standard module, on generated inputs and real trees), and whatever it does not define comes from the
standard module, imported then: an unforeseen use costs a hook time, never a wrong answer. What each saving is
worth, and what was not kept, is in docs/decisions.md ("The hook's fast path").
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # the room's own: it makes the stand-in for `typing`
if TYPE_CHECKING:
    from typing import Any


def enter() -> None:
    """Register the stand-ins for the standard modules this process has not imported (the launcher's first step)."""
    if "os" not in sys.modules:
        from majordomus.lean import os

        sys.modules["os"] = os.stand_in(forwarding("os"), standard)
    if "typing" not in sys.modules:  # of typing, a hook's modules take TYPE_CHECKING only
        made: Any = type(sys)("typing")  # a module object; nothing here imports `types`
        made.TYPE_CHECKING, made.__lean__, made.__getattr__ = False, True, forwarding("typing")
        sys.modules["typing"] = made
    if "dataclasses" not in sys.modules:
        from majordomus.lean import dataclasses

        sys.modules["dataclasses"] = dataclasses.stand_in(forwarding("dataclasses"), standard)
    if "json" not in sys.modules:
        from majordomus.lean import json

        sys.modules["json"] = json.stand_in(forwarding("json"), standard)
    if "pathlib" not in sys.modules:
        from majordomus.lean import pathlib

        sys.modules["pathlib"] = pathlib.stand_in(forwarding("pathlib"), standard)


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
