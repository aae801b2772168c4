"""Reconcile, prune, render and doctor stream the archive: their peak memory does not grow with
the number of records (a list of every parsed record cost ~4.5 KiB a record: 450 MiB at 100k).

Measured on the real executables (peak RSS of the child from wait4) at 1k and 12k records; the growth between
the two must stay far below what holding every record costs (~50 MiB for the 11k more). No wall-clock here."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from majordomus.layout import Layout
from support import MAJORDOMUS, fill_archive

pytestmark = pytest.mark.slow

COMMANDS = (("doctor",), ("capture", "reconcile", "--dry-run"), ("capture", "reconcile"), ("capture", "prune"),
            ("capture", "render", "--force"))


def child_peak(repo: Path, *args: str) -> float:
    """Peak RSS in MiB of one real run, from wait4 on that child alone."""
    proc = subprocess.Popen([str(MAJORDOMUS), *args], cwd=repo, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    assert proc.returncode in (0, 1, 10), (args, err.decode())
    assert b"Traceback" not in err
    return usage.ru_maxrss / 1024


def test_archive_commands_memory_does_not_grow_with_the_archive(tmp_path: Path, run_majordomus) -> None:
    from support import make_initialised

    small = make_initialised(tmp_path / "small", run_majordomus)
    big = make_initialised(tmp_path / "big", run_majordomus)
    fill_archive(small, 1000)
    fill_archive(big, 12000)
    for args in COMMANDS:
        grew = child_peak(big, *args) - child_peak(small, *args)
        assert grew < 15, f"{' '.join(args)}: peak RSS grew {grew:.1f} MiB from 1k to 12k records"
    after = [p for p in (Layout(big).prompts_dir).iterdir() if p.suffix == ".json"]
    assert len(after) == 12000  # no record lost
