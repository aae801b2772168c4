"""`capture install --git`: a `prepare-commit-msg` hook that names the episode a commit was made in.

The hook goes into the directory git runs hooks from (`git rev-parse --git-path hooks`, which honours
core.hooksPath) when that directory is inside this repository or its git directory; a hook a person already
has there is kept and chained (moved beside ours and run first, its exit status as before); ours fails open:
`timeout 0.1` around it, its own 90 ms timer, and `|| true`, so a commit is never blocked or slowed past that.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

from majordomus.errors import MajordomusError, RefusedError
from majordomus.identity import git_argv, run_bounded
from majordomus.layout import write_atomic

HOOK = "prepare-commit-msg"
CHAINED = "prepare-commit-msg.majordomus-chained"
MARK = "# majordomus: prepare-commit-msg (capture install --git)"


def script_path() -> Path:
    return Path(__file__).resolve().parent.parent / "episodes" / "commit_trailer.py"


def _sh_quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def hook_text(python: str, script: str) -> str:
    return f"""#!/bin/sh
{MARK}
# Adds a Majordomus-Episode trailer while exactly one episode of this worktree is open and its turn is running.
# Never blocks a commit: a person's own hook (moved to {CHAINED}) runs first with its exit status as before;
# ours is bounded to 100 ms and its failures are ignored.
here=$(dirname "$0")
if [ -x "$here/{CHAINED}" ]; then
  "$here/{CHAINED}" "$@" || exit $?
fi
# MAJORDOMUS_TRAILER_BUDGET_SECONDS raises the 0.1 s budget (a slow machine, a test that must not flake)
budget="${{MAJORDOMUS_TRAILER_BUDGET_SECONDS:-0.1}}"
case "$budget" in ''|*[!0-9.]*) budget=0.1 ;; esac
if command -v timeout >/dev/null 2>&1; then
  timeout -k 0.05 "$budget" {_sh_quote(python)} -I -S {_sh_quote(script)} "$@" </dev/null >/dev/null 2>&1 || true
else
  {_sh_quote(python)} -I -S {_sh_quote(script)} "$@" </dev/null >/dev/null 2>&1 || true
fi
exit 0
"""


def hooks_dir(root: Path) -> Path:
    code, out = run_bounded(git_argv(root, "rev-parse", "--path-format=absolute", "--git-path", "hooks"), 10.0)
    text = out.decode("utf-8", "replace").strip()
    if code != 0 or not text:
        raise MajordomusError(f"git cannot say where the hooks of {root} live", "run it inside a git repository")
    code, common = run_bounded(git_argv(root, "rev-parse", "--path-format=absolute", "--git-common-dir"), 10.0)
    path = Path(text)
    real = Path(os.path.realpath(path))
    inside = [Path(os.path.realpath(root))]
    if code == 0 and common.strip():
        inside.append(Path(os.path.realpath(common.decode().strip())))
    if not any(real == base or real.is_relative_to(base) for base in inside):
        raise RefusedError(f"core.hooksPath points outside this repository ({path}); majordomus never writes "
                           "outside the repository",
                           f"add this line to the {HOOK} hook there yourself: "
                           f"{_sh_quote(sys.executable)} -I -S {_sh_quote(str(script_path()))} \"$@\" || true")
    return path


def install_git(root: Path) -> list[str]:
    folder = hooks_dir(root)
    folder.mkdir(parents=True, exist_ok=True)
    hook, chained = folder / HOOK, folder / CHAINED
    lines = []
    ours = hook.is_file() and not hook.is_symlink() and MARK in hook.read_text(errors="replace")
    if (hook.exists() or hook.is_symlink()) and not ours:
        if chained.exists() or chained.is_symlink():
            raise RefusedError(f"{hook} is a hook of yours and {chained} exists already",
                               f"merge the two by hand, or remove {chained}, then run it again")
        os.rename(hook, chained)  # moves a symlink itself, never what it points to
        lines.append(f"kept your {HOOK} hook as {chained.name}; it runs first, its exit status as before")
    text = hook_text(sys.executable, str(script_path()))
    if ours and hook.read_text(errors="replace") == text:
        return lines + [f"{hook}: already wired (unchanged)"]
    write_atomic(hook, text.encode(), 0o755)
    mode = stat.S_IMODE(hook.stat().st_mode)
    lines.append(f"{hook}: {'updated' if ours else 'added'} (mode {mode:o}); commits made while exactly one "
                 "episode of this worktree is open and its turn is running get a Majordomus-Episode trailer")
    return lines


def uninstall_git(root: Path, *, dry_run: bool = False) -> list[str]:
    """Take our prepare-commit-msg hook out, and put a person's own (chained beside it) back in its place."""
    folder = hooks_dir(root)
    hook, chained = folder / HOOK, folder / CHAINED
    ours = hook.is_file() and not hook.is_symlink() and MARK in hook.read_text(errors="replace")
    prefix = "would " if dry_run else ""
    if not ours:
        return [f"{hook}: not majordomus's hook; nothing to remove"]
    lines = [f"{prefix}remove {hook} (majordomus's trailer hook)"]
    if chained.exists() or chained.is_symlink():
        lines.append(f"{prefix}put your {HOOK} hook back from {chained.name}")
    if not dry_run:
        hook.unlink()
        if chained.exists() or chained.is_symlink():
            os.rename(chained, hook)  # moves a symlink itself, never what it points to
    return lines
