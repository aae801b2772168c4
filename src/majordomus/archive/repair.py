"""`capture render`'s work over the whole archive.

Modes back to 0700/0600, stale temp files removed, renderings rewritten.

Every record is read through `scan`, like reconcile and prune read it; the renderings come from `render`.
"""

from __future__ import annotations

import os
import stat
import time
from dataclasses import dataclass, field, replace
from hashlib import sha256 as fast_sha256  # OpenSSL's: not the hook's builtin, 3-4x faster a record

from majordomus.archive import record as rec
from majordomus.archive.render import _NS, fingerprint, fingerprinted, refresh
from majordomus.archive.scan import entries, halves, record_names
from majordomus.errors import RefusedError
from majordomus.layout import PRIVATE_DIR, PRIVATE_FILE, Layout, write_atomic

STALE_TEMP_SECONDS = 600  # a capture's temp file older than this belongs to a process that died


def repair_modes(layout: Layout, renderings: set[str] | None = None,
                 records: list[str] | None = None) -> tuple[int, int, list[str]]:
    """Directory 0700, every regular file 0600; symlinks are never followed.

    Returns (files repaired, stale temps removed, links). With `records`, it is filled with the records' names,
    sorted (`scan.record_names`, without a listing of its own), and a record's mode is left to
    `render_all(..., records=...)`, which takes it from an fstat of the fd its read opens (100k stats fewer). With
    `renderings` too, it is filled with the renderings' names, and a rendering beside a record is left unstat'ed:
    `render_all` stats it by name beside its record's read, in two processes over a large archive; a
    rendering without a record is repaired here.
    """
    directory = layout.prompts_dir
    if stat.S_IMODE(os.lstat(directory).st_mode) != PRIVATE_DIR:
        os.chmod(directory, PRIVATE_DIR)
    repaired = removed = 0
    links: list[str] = []
    now = time.time()
    rendering = (".md", ".yaml")
    shown = renderings if records is not None else None
    dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        # through the directory's fd: each stat, chmod and unlink is of a name in it, not a walk of its path
        with os.scandir(dir_fd) as entries:
            for entry in entries:
                name = entry.name
                if records is not None and rec.is_record_name(name):
                    records.append(name)  # its mode: render_all's fstat; a symlink is refused there too
                    if entry.is_symlink():  # the listing's own file type: no stat
                        links.append(name)
                    continue
                if entry.is_symlink():
                    links.append(name)
                    continue
                if shown is not None and name.endswith(rendering) and not name.startswith("."):
                    shown.add(name)  # stat'ed beside its record's read (render_all), or as a stray below
                    continue
                fixed, gone = _repair(name, dir_fd, now)
                repaired, removed = repaired + fixed, removed + gone
        if records is not None:
            records.sort()
        if shown is not None and records is not None:
            stems = {name[:-5] for name in records}
            for name in shown:
                if name.rsplit(".", 1)[0] not in stems:
                    repaired += _repair(name, dir_fd, now)[0]
    finally:
        os.close(dir_fd)
    return repaired, removed, links


def _repair(name: str, dir_fd: int, now: float) -> tuple[int, int]:
    """One name that is not a record: (1, 0) when its mode was set to 0600, (0, 1) when it was a stale temp and is
    removed, (0, 0) when it is right, or not a plain file, or gone since the listing."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return 0, 0
    if not stat.S_ISREG(st.st_mode):
        return 0, 0
    if name.startswith(".") and name.endswith(".tmp") and now - st.st_mtime > STALE_TEMP_SECONDS:
        # a capture killed before its rename: not a record, and it may hold a body
        os.unlink(name, dir_fd=dir_fd)
        return 0, 1
    if stat.S_IMODE(st.st_mode) != PRIVATE_FILE:
        os.chmod(name, PRIVATE_FILE, dir_fd=dir_fd, follow_symlinks=False)
        return 1, 0
    return 0, 0


@dataclass
class Rendered:
    """What `render_all` did (over one part of the records, `scan.halves`, or all of them)."""

    written: int = 0  # renderings written
    failed: int = 0  # renderings that could not be written
    modes: int = 0  # renderings beside a record whose mode was set to 0600
    refused: list[str] = field(default_factory=list)  # records this writer cannot account for, or a link
    narrowed: list[str] = field(default_factory=list)  # records whose mode was set to 0600

    def merge(self, part: Rendered) -> None:
        self.written += part.written
        self.failed += part.failed
        self.modes += part.modes
        self.refused += part.refused
        self.narrowed += part.narrowed


def render_all(layout: Layout, *, force: bool = False, renderings: set[str] | None = None,
               records: list[str] | None = None) -> Rendered:
    """Renderings written where missing or disagreeing with their record, records not pretty reformatted, or all
    with force; over a large archive in two processes at once (`scan.halves`: most of it is system calls).

    A rendering whose bytes are already right is not written again, even with force (2 renames a record
    were most of `render --force`); with force each is still read and compared, without it one that carries its
    record's fingerprint is taken as agreeing (render.fingerprinted). `records` and `renderings` are the names
    `repair_modes(..., renderings, records)` listed a moment before, under the same archive lock: each record's
    mode is then set to 0600 here, from the fstat of its read, and each of its renderings' from a stat by name
    that also gives its fingerprint."""
    names = record_names(layout) if records is None else records
    done = Rendered()
    for part in halves(names, lambda some: _render_part(layout, some, force, renderings, records is not None)):
        done.merge(part)
    return done


def _render_part(layout: Layout, names: list[str], force: bool, shown: set[str] | None, own_modes: bool) -> Rendered:
    directory = layout.prompts_dir
    done = Rendered()
    base = os.fspath(directory)
    dir_fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        for entry in entries(layout, names, modes=own_modes):  # one record at a time
            mode = entry.mode
            if stat.S_ISREG(mode) and stat.S_IMODE(mode) != PRIVATE_FILE:
                os.chmod(entry.name, PRIVATE_FILE, dir_fd=dir_fd, follow_symlinks=False)
                done.narrowed.append(entry.name)
                if entry.record is None and not mode & 0o400:  # unreadable until now: read it again
                    entry = next(entries(layout, [entry.name]))
            stem = entry.stem
            if shown is not None:  # each rendering's stat: its mode repaired, its fingerprint read
                md, yml = _seen(stem + ".md", shown, dir_fd, done), _seen(stem + ".yaml", shown, dir_fd, done)
            if entry.record is None:
                done.refused.append(entry.name)
                continue
            if entry.pretty and not force:
                if shown is not None:
                    mark = fingerprint(entry.raw, fast_sha256)
                    if md == mark and yml == mark:
                        continue  # both renderings written whole from exactly these record bytes
                    seen = md is not None and yml is not None
                else:
                    seen = False
                if not seen and fingerprinted(directory, stem, entry.raw):
                    continue
            try:
                record, data = entry.record, entry.raw
                if not entry.pretty:  # an older one-line record, every member known and scalar: reformat, re-stamp
                    record = replace(record, schema=rec.SCHEMA)
                    data = rec.dumps(record)
                    write_atomic(entry.path, data, PRIVATE_FILE)
                # no fsync each: a rendering is rebuilt from its record by this very command (the
                # record's own rewrite above stays durable)
                done.written += refresh(directory, stem, record, data)
            except RefusedError:  # a symlink under a rendering's name
                done.refused.append(entry.name)
            except OSError:
                done.failed += 1
    finally:
        os.close(dir_fd)
    return done


def _seen(name: str, shown: set[str], dir_fd: int, done: Rendered) -> int | None:
    """A rendering's fingerprint (its mtime's nanoseconds) when the listing had it and it is a plain file, its
    mode set to 0600 on the way; None otherwise (render.fingerprinted then looks again)."""
    if name not in shown:
        return None
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    if stat.S_IMODE(st.st_mode) != PRIVATE_FILE:
        os.chmod(name, PRIVATE_FILE, dir_fd=dir_fd, follow_symlinks=False)
        done.modes += 1
    return st.st_mtime_ns % _NS
