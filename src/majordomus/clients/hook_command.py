"""The command line a client's hook file runs for majordomus, and how to tell one of ours from a person's.

Every hook command fails open (SPEC §7): it runs the lean launcher `majordomus-hook` when it is there and does
nothing otherwise, says nothing to the person, and exits 0 whatever happened — a teammate who cloned the
repository without majordomus, or whose virtualenv is not active, keeps a working agent. A shared file names
the launcher by name (it works on every clone where it is on PATH); a per-person file names this machine's
absolute path (it needs no PATH). The launcher itself turns any failure into exit 0 and a line in
`.ai/local/hook-failures.log`; the shell around it covers what the launcher cannot: an interpreter that will
not start. Where the launcher's own `#!` line names an interpreter, the per-person form starts that interpreter
itself as `python -IS launcher`: isolated and without `site`, whose .pth work on every start is most of an
interpreter's start-up (pip writes a script's `#!` line without flags, so the flags must be in the command).
Commands an earlier install wrote (`majordomus capture …` bare, or by absolute path) are ours too,
so a new install replaces them in place.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

LAUNCHER = "majordomus-hook"
QUIET = "2>/dev/null; exit 0"  # nothing for the person to read, and no opinion whatever happened


@dataclass(frozen=True)
class HookCommand:
    """A hook command of ours: the executable it runs (a name, or an absolute path) and the words after it."""

    executable: str
    words: tuple[str, ...]
    interpreter: str | None = None  # `interpreter -IS executable …`; None: the executable's own `#!` line starts it


FLAGS = "-IS"


SHARED_HEAD = (f'l=$(command -v {LAUNCHER}) || exit 0; read -r p < "$l" 2>/dev/null; '
               f'case $p in "#!/"*python*) ${{p#??}} {FLAGS} "$l" ')


def shared_command(tail: tuple[str, ...]) -> str:
    """For a file teammates get through git: the launcher found on PATH, or nothing at all.

    The shell starts the interpreter the launcher's `#!` line names as `python -IS launcher` itself, as the
    per-person form does: pip and uv write that line without the wheel's flags, so the launcher run by its own
    `#!` line would start with `site` (about 2 ms a prompt). Only the shell's builtins read the line; a line
    that names no python (pip's `#!/bin/sh` form for a long path) runs the launcher as it is."""
    words = shlex.join(tail)
    return f'{SHARED_HEAD}{words} 2>/dev/null;; *) "$l" {words} 2>/dev/null;; esac; exit 0'


def local_command(launcher: Path, tail: tuple[str, ...]) -> str:
    """For a per-person file: this machine's launcher by absolute path, or nothing when it is gone."""
    exe = shlex.quote(str(launcher))
    python = interpreter_of(launcher)
    if python is None:
        return f"[ -x {exe} ] || exit 0; {exe} {shlex.join(tail)} {QUIET}"
    py = shlex.quote(python)
    return f"[ -x {py} ] && [ -f {exe} ] || exit 0; {py} {FLAGS} {exe} {shlex.join(tail)} {QUIET}"


def interpreter_of(launcher: Path) -> str | None:
    """The interpreter the launcher's `#!` line names, when it is one absolute path the command can name instead
    (not `#!/bin/sh` with an exec trick, not `/usr/bin/env python3`), with or without a flag; None otherwise."""
    try:
        with open(launcher, "rb") as f:
            first = f.readline(512)
    except OSError:
        return None
    if not first.startswith(b"#!/") or not first.endswith(b"\n"):
        return None
    words = first[2:].decode("utf-8", "replace").split()
    if not 1 <= len(words) <= 2 or "python" not in Path(words[0]).name or not all(
            w.startswith("-") for w in words[1:]):
        return None  # its own flags (pip writes `-E` in some versions) give way to -IS, which holds -E
    return words[0]


def parse(command: object) -> HookCommand | None:
    """The executable and words of a command of ours, in any form an install has written; None for anything else."""
    if not isinstance(command, str):
        return None
    text = command.strip()
    if text.startswith(SHARED_HEAD):  # ours only as written, word for word
        try:
            tail = tuple(shlex.split(text[len(SHARED_HEAD):].split(" 2>/dev/null;; ", 1)[0]))
        except ValueError:
            return None
        return HookCommand(LAUNCHER, tail) if shared_command(tail) == text else None
    guard = f"command -v {LAUNCHER} >/dev/null 2>&1 || exit 0; "  # the shared form installs before wrote
    if text.startswith(guard) and text.endswith(f" {QUIET}"):
        return _words(text[len(guard):-len(QUIET) - 1], expect=LAUNCHER)
    if text.startswith("[ -x ") and " ] && [ -f " in text and text.endswith(f" {QUIET}"):
        head, sep, rest = text[len("[ -x "):].partition(" ] || exit 0; ")
        python, _, launcher = head.partition(" ] && [ -f ")
        found = _words(rest[:-len(QUIET) - 1], expect=None, interpreted=True) if sep else None
        if found is None or found.interpreter is None or (shlex.quote(found.interpreter), shlex.quote(
                found.executable)) != (python, launcher):
            return None
        return found
    if text.startswith("[ -x ") and text.endswith(f" {QUIET}"):
        head, sep, rest = text[len("[ -x "):].partition(" ] || exit 0; ")
        found = _words(rest[:-len(QUIET) - 1], expect=None) if sep else None
        if found is None or shlex.quote(found.executable) != head:
            return None
        return found
    return _words(text, expect=None)  # what installs before fail-open wrote: `majordomus capture …` bare


def _words(text: str, *, expect: str | None, interpreted: bool = False) -> HookCommand | None:
    try:
        words = shlex.split(text)
    except ValueError:
        return None
    interpreter = None
    if interpreted:  # `interpreter -IS launcher …`
        if len(words) < 3 or words[1] != FLAGS:
            return None
        interpreter, words = words[0], words[2:]
    if not words or not Path(words[0]).name.startswith("majordomus") or (expect and words[0] != expect):
        return None
    if any(w in (";", "&&", "||", "|") or w.startswith(("<", ">", "2>")) for w in words):
        return None  # a person's pipeline around a majordomus word is theirs, not ours
    return HookCommand(words[0], tuple(words[1:]), interpreter)


def is_ours(command: object, tail: tuple[str, ...]) -> bool:
    """A hook command is ours when it runs a majordomus executable with exactly these words (an optional --repo)."""
    found = parse(command)
    if found is None:
        return False
    rest = list(found.words)
    if rest[:1] == ["--repo"]:
        rest = rest[2:]
    return tuple(rest) == tail
