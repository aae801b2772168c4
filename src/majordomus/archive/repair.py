"""`capture render`'s work over the whole archive.

Modes back to 0700/0600, stale temp files removed, renderings rewritten.

Every record is read through `scan`, like reconcile and prune read it; the renderings come from `render`.
"""

from __future__ import annotations

import os
import stat
import time

from majordomus.archive import record as rec
from majordomus.archive.render import fingerprinted, refresh
from majordomus.archive.scan import entries
from majordomus.errors import RefusedError
from majordomus.layout import PRIVATE_DIR, PRIVATE_FILE, Layout, write_atomic
from majordomus.values import replace

STALE_TEMP_SECONDS = 600  # a capture's temp file older than this belongs to a process that died


def repair_modes(layout: Layout) -> tuple[int, int, list[str]]:
    """Directory 0700, every regular file 0600; symlinks are never followed.

    Returns (files repaired, stale temps removed, links).
    """
    directory = layout.prompts_dir
    if stat.S_IMODE(os.lstat(directory).st_mode) != PRIVATE_DIR:
        os.chmod(directory, PRIVATE_DIR)
    repaired = removed = 0
    links: list[str] = []
    now = time.time()
    with os.scandir(directory) as entries:
        for entry in entries:
            if entry.is_symlink():
                links.append(entry.name)
                continue
            if not entry.is_file(follow_symlinks=False):
                continue
            st = entry.stat(follow_symlinks=False)
            if entry.name.startswith(".") and entry.name.endswith(".tmp") and now - st.st_mtime > STALE_TEMP_SECONDS:
                # a capture killed before its rename: not a record, and it may hold a body
                os.unlink(entry.path)
                removed += 1
                continue
            if stat.S_IMODE(st.st_mode) != PRIVATE_FILE:
                os.chmod(entry.path, PRIVATE_FILE, follow_symlinks=False)
                repaired += 1
    return repaired, removed, links


def render_all(layout: Layout, *, force: bool = False) -> tuple[int, int, list[str]]:
    """(renderings written, failures, refused names): renderings missing or disagreeing with their record, records
    not pretty, or all with force.

    A rendering whose bytes are already right is not written again, even with force (issue 12: 2 renames a record
    were most of `render --force`); with force each is still read and compared, without it one that carries its
    record's fingerprint is taken as agreeing (render.fingerprinted)."""
    directory = layout.prompts_dir
    written = failed = 0
    refused: list[str] = []
    for entry in entries(layout):  # one record at a time (issue 12)
        if entry.record is None:
            refused.append(entry.name)
            continue
        if entry.pretty and not force and fingerprinted(directory, entry.stem, entry.raw):
            continue  # both renderings written whole from exactly these record bytes
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
