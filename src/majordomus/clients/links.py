"""What every command that writes a client's file refuses first: a link on the way to it."""

from __future__ import annotations

from pathlib import Path

from majordomus.errors import RefusedError


def refuse_links(root: Path, rel: str) -> None:
    """A linked config or hook file (or a linked folder on the way to it) could send the write anywhere: refuse,
    never follow."""
    path = root
    for part in Path(rel).parts:
        path = path / part
        if path.is_symlink():
            raise RefusedError(f"{path.relative_to(root)} is a symbolic link; majordomus does not write through links",
                               "replace it with a real file or folder, or wire this client by hand")
