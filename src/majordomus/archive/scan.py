"""The archive as a whole: one pass that reads every record once, the lock its rewriters share, a rewrite.

Reconcile, prune, render and doctor's findings read through `scan`; each record is read and parsed once.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from majordomus.archive import record as rec
from majordomus.archive.render import write_renderings
from majordomus.layout import PRIVATE_FILE, Layout, file_lock, write_atomic
from majordomus.values import replace


@dataclass
class Entry:
    """One file under a record's name: the record, or why this writer cannot account for it; and its bytes."""

    name: str
    directory: Path
    record: rec.PromptRecord | None
    problem: str | None
    pretty: bool
    raw: bytes = b""  # the record's bytes as read: what its renderings' fingerprint is taken of

    @property
    def path(self) -> Path:
        return self.directory / self.name

    @property
    def stem(self) -> str:
        return self.name[: -len(".json")]


def record_names(layout: Layout) -> list[str]:
    """Every record's file name, oldest first (the name starts with the capture second)."""
    try:
        names = os.listdir(layout.prompts_dir)
    except FileNotFoundError:
        return []
    return sorted(n for n in names if rec.is_record_name(n))


def scan(layout: Layout, names: list[str] | None = None) -> list[Entry]:
    """Every entry at once: for a few records (tests, one name); the archive's commands stream `entries`."""
    return list(entries(layout, names))


def entries(layout: Layout, names: Iterable[str] | None = None) -> Iterator[Entry]:
    """Each record read and parsed in turn, oldest first: a caller that keeps only what it needs of each holds
    one parsed record at a time, never the archive (100k records parsed at once were 450 MiB, issue 12)."""
    directory = layout.prompts_dir
    base = os.fspath(directory)
    for name in record_names(layout) if names is None else names:
        try:
            raw = rec.read_bytes(os.path.join(base, name))  # a str path: a Path a record cost ~4 µs (issue 12)
        except OSError as exc:
            # ELOOP: a symlink under a record's name, refused rather than followed
            why = "is a symbolic link" if os.path.islink(os.path.join(base, name)) else \
                f"cannot be read ({exc.strerror})"
            yield Entry(name, directory, None, why, False)
            continue
        try:
            yield Entry(name, directory, rec.parse(raw), None, rec.is_pretty(raw), raw)
        except rec.RecordError as exc:
            yield Entry(name, directory, None, str(exc), False)


@contextlib.contextmanager
def lock_archive(layout: Layout) -> Iterator[None]:
    """Held by reconcile, prune and render while they rewrite: two rewriters never race on one record.

    Capture never takes it: a capture only creates new names, exclusively.
    """
    with file_lock(layout.locks / "prompts.lock"):
        yield


def rewrite(layout: Layout, entry: Entry, record: rec.PromptRecord) -> None:
    """Replace a record and both renderings, each atomically (never a partial file under its name)."""
    record = replace(record, schema=rec.SCHEMA)
    # the renderings first: a kill between the two writes leaves a record that still asks for the rewrite
    # (the next run redoes it), never a record whose body was taken beside renderings that keep it
    # the renderings need no fsync (rebuildable: docs/decisions.md); the record keeps its fsync before its rename
    data = rec.dumps(record)
    write_renderings(layout.prompts_dir, entry.stem, record, record_bytes=data)
    write_atomic(entry.path, data, PRIVATE_FILE)
    entry.record = record
    entry.pretty = True
    entry.raw = data


def has_archive(layout: Layout) -> bool:
    """Whether there is an archive to work on; a symlinked archive directory is refused, never followed."""
    from majordomus.errors import RefusedError

    if layout.prompts_dir.is_symlink():
        raise RefusedError(f"{layout.prompts_dir.relative_to(layout.root)} is a symbolic link; the archive is "
                           "never followed through a link",
                           "replace it with a real directory, then run majordomus update")
    return layout.prompts_dir.is_dir()
