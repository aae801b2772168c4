"""bench/export.py runs, small, and finds no error: it reuses bench/prompt_archive.py's launcher, whose answer
grew a member once without export.py noticing (a bench that cannot run measures nothing)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench" / "export.py"


@pytest.mark.slow
def test_the_export_bench_runs_and_counts_no_error() -> None:
    done = subprocess.run([sys.executable, str(BENCH), "--sizes", "300"], capture_output=True, text=True,
                          timeout=240)
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines() if line.strip().startswith("300 ")]
    assert len(rows) == 4, done.stdout  # json, html, each with and without the prompts
    assert all(row[-1] == "0" for row in rows), done.stdout  # the errors column
