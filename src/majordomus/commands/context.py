"""What every command gets: the global options and the root; the house argparse parser; the hook's quick flags.

The only module the commands share, and nothing below `commands/` imports it. Stdlib only: the hook
commands import it, so argparse is imported only when a command needs the full parser.
"""

from __future__ import annotations

import os
from pathlib import Path

from majordomus.errors import UsageError


class Context:
    """The global options, and the root found once, when first asked."""

    def __init__(self, repo: str | Path | None = None, json: bool = False) -> None:
        self.repo = repo
        self.json = json
        self._root: str | None = None

    def _root_text(self) -> str:
        """`--repo`, else the git top level of the current directory (exit 12 outside a repository)."""
        if self._root is None:
            from majordomus.identity import find_root_str

            found = find_root_str(self.repo if self.repo is not None else os.getcwd())
            if self.repo is not None and not os.path.exists(os.path.join(found, ".git")):
                found = os.path.realpath(self.repo)
            self._root = found
        return self._root

    @property
    def root(self) -> Path:
        return Path(self._root_text())


def parser(prog: str, description: str):  # type: ignore[no-untyped-def]
    """An argparse parser whose usage errors exit 2 with the house sentence."""
    import argparse

    class Parser(argparse.ArgumentParser):
        def error(self, message: str) -> None:  # type: ignore[override]
            raise UsageError(f"{prog}: {message}", f"try 'majordomus {prog} --help'")

    return Parser(prog=f"majordomus {prog}", description=description)


def quick_flags(argv: list[str], valued: tuple[str, ...], switches: tuple[str, ...] = ("--dry-run",)
                ) -> dict[str, str | bool] | None:
    """A hook's own argument shape, read without argparse (whose import costs every hook ~2 ms).

    `--name value`, `--name=value` for each of `valued`, bare `switches`; keys without the dashes, `-`
    as `_`. None for anything else (help, a typo, a repeated flag): the full parser then says what is
    wrong, so both readers accept exactly the same spellings.
    """
    flags: dict[str, str | bool] = {}
    rest = list(argv)
    while rest:
        word = rest.pop(0)
        name, eq, inline = word.partition("=")
        key = name[2:].replace("-", "_")
        if key in flags:
            return None
        if word in switches:
            flags[key] = True
        elif name in valued and eq and inline:
            flags[key] = inline
        elif word in valued and rest and not rest[0].startswith("-"):
            flags[key] = rest.pop(0)
        else:
            return None
    return flags
