"""The stand-in for `typing` in a hook (majordomus.lean says when): `TYPE_CHECKING`, and nothing else of its own.

Importing `typing` costs a hook 6-10 ms (it imports `re`, and `enum` and `functools` with it). The hook path's
modules take from it at run time only `TYPE_CHECKING` (False), the rest under `if TYPE_CHECKING:`, as type
checkers read it; anything else a hook asks for at run time is the standard module's, imported then.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # this room's own: it is what makes the stand-in
if TYPE_CHECKING:
    from typing import Any


def stand_in() -> Any:
    from majordomus.lean.standard import forwarding

    made = type(sys)("typing")
    made.TYPE_CHECKING = False  # type: ignore[attr-defined]
    made.__lean__ = True  # type: ignore[attr-defined]
    made.__getattr__ = forwarding("typing")  # type: ignore[method-assign]
    return made
