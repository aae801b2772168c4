"""Hooks that are executables, one per event, in a folder the client reads (Cline: `.clinerules/hooks/TaskStart`).

Such a client reads no configuration file: it runs every file in its hooks folder named after an event, through
the interpreter its shebang names, with the payload on stdin, and reads what the file prints as
`{"cancel": …, "contextModification": …, "errorMessage": …}`. Each file install writes is a short `sh` script: the
fail-open shared command (the launcher when it is on PATH, quietly, or nothing), its output thrown away, then
`{"cancel": false}` whatever happened — a teammate without majordomus gets a hook with no opinion.

A file of that name that is not ours is a person's own hook: install refuses, naming it, and leaves it
byte-identical (it does not chain it: a person's hook decides `cancel`, and two answers on one stdout are not
one answer). A file of ours is recognised by its marker line, so a later install rewrites it in place.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from majordomus.clients.hook_command import shared_command
from majordomus.clients.links import refuse_links
from majordomus.clients.providers import Provider
from majordomus.errors import RefusedError

SCRIPT_MODE = 0o755
NO_OPINION = '{"cancel": false}'


def marker(provider: Provider) -> str:
    return (f"# majordomus: written by `majordomus capture install --provider {provider.name}`; "
            f"`majordomus capture uninstall --provider {provider.name}` removes it")


def script(provider: Provider, tail: tuple[str, ...]) -> bytes:
    """The hook file for one event: the fail-open command with its output discarded, then no opinion."""
    return (f"#!/bin/sh\n{marker(provider)}\n"
            f"( {shared_command(tail)} ) >/dev/null\n"
            f"printf '%s\\n' {shlex.quote(NO_OPINION)}\n").encode()


def is_ours(data: bytes, provider: Provider) -> bool:
    return marker(provider).encode() in data.splitlines()


def command_of(data: bytes) -> str | None:
    """The hook command inside a file of ours (the line between `( ` and ` ) >/dev/null`), for status and doctor."""
    for line in data.decode("utf-8", "replace").splitlines():
        if line.startswith("( ") and line.endswith(" ) >/dev/null"):
            return line[2:-len(" ) >/dev/null")]
    return None


def rel_of(provider: Provider, event: str) -> str:
    assert provider.config is not None  # an executables row names the folder (providers.problems checks)
    return f"{provider.config.rstrip('/')}/{event}"


def plan(root: Path, provider: Provider, wanted: list[tuple[str, tuple[str, ...]]]) -> tuple[list[tuple[str, bytes]],
                                                                                              list[str]]:
    """(rel, bytes) to write and the sentences saying so; RefusedError, before anything is written, for a person's
    own hook of the same name or a link on the way."""
    writes: list[tuple[str, bytes]] = []
    added: list[str] = []
    updated: list[str] = []
    for event, tail in wanted:
        rel = rel_of(provider, event)
        refuse_links(root, rel)
        path = root / rel
        data = script(provider, tail)
        if path.exists():
            current = path.read_bytes() if path.is_file() else b""
            if not path.is_file() or not is_ours(current, provider):
                raise RefusedError(f"{rel} is your own {provider.title} hook; majordomus neither overwrites nor "
                                   "chains it, and left it as it is",
                                   f"rename it (for example to {rel}.mine) and call it from there, or add "
                                   f"`majordomus-hook {' '.join(tail)}` to it by hand, then run capture install "
                                   "again")
            if current == data and os.access(path, os.X_OK):
                continue
            updated.append(event)
        else:
            added.append(event)
        writes.append((rel, data))
    folder = provider.config or ""
    lines = []
    if added:
        lines.append(f"{folder}: added the hook executables {', '.join(added)} (each prints {NO_OPINION})")
    if updated:
        lines.append(f"{folder}: updated majordomus's hook executables {', '.join(updated)}")
    return writes, lines


def commands(root: Path, provider: Provider, events: list[str]) -> dict[str, list[str]]:
    """The hook command each of our files runs, by event (a person's own file of that name: not ours, absent)."""
    out: dict[str, list[str]] = {}
    for event in events:
        path = root / rel_of(provider, event)
        if path.is_symlink() or not path.is_file():
            continue
        data = path.read_bytes()
        command = command_of(data) if is_ours(data, provider) else None
        if command is not None and os.access(path, os.X_OK):
            out.setdefault(event, []).append(command)
    return out
