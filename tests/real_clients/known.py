"""The product's known gaps that these tests expose, each with what is still wrong and why.

A test that asserts SPEC's truth and fails today because of one of them is marked with `known(...)`:
xfail, strict, and only for an AssertionError, so it turns into a failure the day the product is fixed and
a client that crashes is still an error.
"""

from __future__ import annotations

from typing import Any

import pytest

from real_clients.drivers import CLIENTS

COPILOT_SIGKILL = ("Copilot SIGKILLs majordomus-mcp 3 ms after SIGTERM, and even with SIGTERM's durable work done "
                   "first, after a real Copilot sitting the attached episode still stays held_by a dead pid with no "
                   "detached_at (doctor reports it as INFO, naming recover)")

def known(reason: str) -> pytest.MarkDecorator:
    return pytest.mark.xfail(strict=True, raises=AssertionError, reason=reason)


def racing(reason: str) -> pytest.MarkDecorator:
    """A gap the product narrowed but a race can still open (SIGTERM's durable work against Copilot's SIGKILL
    3 ms later, on a loaded machine): xfail, not strict, so a sitting that wins is reported (-rX), not a failure.
    bench/sigterm.py measures how often it is won."""
    return pytest.mark.xfail(strict=False, raises=AssertionError, reason=reason)


def each_client(**gaps: str) -> list[Any]:
    """The four clients as parameters, each marked with its known gap where it has one (`claude_code=...`)."""
    named = {name.replace("_", "-"): reason for name, reason in gaps.items()}
    unknown = set(named) - set(CLIENTS)
    if unknown:
        raise ValueError(f"no such client: {sorted(unknown)}")
    return [pytest.param(client, id=client, marks=[(racing if named[client] in RACES else known)(named[client])]
                         if client in named else [])
            for client in CLIENTS]


RACES = frozenset({COPILOT_SIGKILL})
