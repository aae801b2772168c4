"""bench/otlp_export.py runs, small, and finds no error: its sink counts every span and log record it decoded,
and a bench that cannot run measures nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench" / "otlp_export.py"


@pytest.mark.slow
def test_the_otlp_export_bench_runs_and_counts_no_error() -> None:
    done = subprocess.run([sys.executable, str(BENCH), "--episodes", "300", "--prompts", "3000"],
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "300 episodes, 3000 prompt log records" in done.stdout, done.stdout
    rows = [line.split() for line in done.stdout.splitlines() if line.strip().startswith(("baseline", "otlp/http"))]
    assert len(rows) == 2 and all(row[-1] == "0" for row in rows), done.stdout  # the errors column
    assert "errors 0" in done.stdout
