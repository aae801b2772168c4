"""`capture render`'s work over the whole archive.

Modes back to 0700/0600, stale temp files removed, renderings rewritten.

Every record is read through `scan`, like reconcile and prune read it; the renderings come from `render`.
"""

from __future__ import annotations

import os
import stat
import time
from hashlib import sha256 as fast_sha256  # OpenSSL's: not the hook's builtin, 3-4x faster a record

from majordomus.archive import record as rec
from majordomus.archive.render import _NS, fingerprint, fingerprinted, refresh
from majordomus.archive.scan import entries
from majordomus.errors import RefusedError
from majordomus.layout import PRIVATE_DIR, PRIVATE_FILE, Layout, write_atomic
from majordomus.values import replace

STALE_TEMP_SECONDS = 600  # a capture's temp file older than this belongs to a process that died


def repair_modes(layout: Layout, stamps: dict[str, int] | None = None,
                 records: list[str] | None = None) -> tuple[int, int, list[str]]:
    """Directory 0700, every regular file 0600; symlinks are never followed.

    Returns (files repaired, stale temps removed, links). With `stamps`, it is filled with each plain rendering's
    mtime nanoseconds (its fingerprint, render.py) from the stat this walk makes anyway: `render_all` then needs
    no stat of its own per rendering (200k at 100k records, issue 12). With `records`, it is filled with the
    records' names, sorted (`scan.record_names`, without a listing of its own), and a record's mode is left to
    `render_all(..., records=...)`, which takes it from an fstat of the fd its read opens (100k stats fewer).
    """
    directory = layout.prompts_dir
    if stat.S_IMODE(os.lstat(directory).st_mode) != PRIVATE_DIR:
        os.chmod(directory, PRIVATE_DIR)
    repaired = removed = 0
    links: list[str] = []
    now = time.time()
    rendering = (".md", ".yaml")
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
                if not entry.is_file(follow_symlinks=False):
                    continue
                st = entry.stat(follow_symlinks=False)
                if name.startswith(".") and name.endswith(".tmp") and now - st.st_mtime > STALE_TEMP_SECONDS:
                    # a capture killed before its rename: not a record, and it may hold a body
                    os.unlink(name, dir_fd=dir_fd)
                    removed += 1
                    continue
                if stat.S_IMODE(st.st_mode) != PRIVATE_FILE:
                    os.chmod(name, PRIVATE_FILE, dir_fd=dir_fd, follow_symlinks=False)
                    repaired += 1
                if stamps is not None and name.endswith(rendering) and stat.S_ISREG(st.st_mode):
                    stamps[name] = st.st_mtime_ns % _NS
    finally:
        os.close(dir_fd)
    if records is not None:
        records.sort()
    return repaired, removed, links


def render_all(layout: Layout, *, force: bool = False, stamps: dict[str, int] | None = None,
               records: list[str] | None = None, narrowed: list[str] | None = None) -> tuple[int, int, list[str]]:
    """(renderings written, failures, refused names): renderings missing or disagreeing with their record, records
    not pretty, or all with force.

    A rendering whose bytes are already right is not written again, even with force (issue 12: 2 renames a record
    were most of `render --force`); with force each is still read and compared, without it one that carries its
    record's fingerprint is taken as agreeing (render.fingerprinted). `stamps` are the renderings' fingerprints as
    `repair_modes` saw them a moment before, under the same archive lock; a rendering it did not see is stat'ed.
    `records` are the names `repair_modes(..., records=...)` listed: each record's mode is then set to 0600 here,
    from the fstat of its read, and its name added to `narrowed`."""
    directory = layout.prompts_dir
    written = failed = 0
    refused: list[str] = []
    base = os.fspath(directory)
    for entry in entries(layout, records, modes=records is not None):  # one record at a time (issue 12)
        mode = entry.mode
        if stat.S_ISREG(mode) and stat.S_IMODE(mode) != PRIVATE_FILE:
            os.chmod(os.path.join(base, entry.name), PRIVATE_FILE, follow_symlinks=False)
            if narrowed is not None:
                narrowed.append(entry.name)
            if entry.record is None and not mode & 0o400:  # unreadable until now: read it again
                entry = next(entries(layout, [entry.name]))
        if entry.record is None:
            refused.append(entry.name)
            continue
        if entry.pretty and not force:
            stem = entry.stem
            if stamps is not None:
                mark = fingerprint(entry.raw, fast_sha256)
                md, yml = stamps.get(stem + ".md"), stamps.get(stem + ".yaml")
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
            # no fsync each: a rendering is rebuilt from its record by this very command (issue 12; the
            # record's own rewrite above stays durable)
            written += refresh(directory, entry.stem, record, data)
        except RefusedError:  # a symlink under a rendering's name
            refused.append(entry.name)
        except OSError:
            failed += 1
    return written, failed, refused
