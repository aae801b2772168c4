"""The package type-checks under mypy --strict: annotations are part of the contract (STYLE §3)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "majordomus"


@pytest.mark.slow
def test_the_package_passes_mypy_strict(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / "cache"), str(SRC)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
