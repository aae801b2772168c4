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


def enter() -> None:
    """Register the stand-ins for the standard modules this process has not imported (the launcher's first step)."""
    if "os" not in sys.modules:
        from majordomus.lean import os

        sys.modules["os"] = os.stand_in()
    if "typing" not in sys.modules:
        from majordomus.lean import typing

        sys.modules["typing"] = typing.stand_in()
    if "pathlib" not in sys.modules:
        from majordomus.lean import pathlib

        sys.modules["pathlib"] = pathlib.stand_in()
