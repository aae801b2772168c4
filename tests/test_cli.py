"""The command line's own surface: --version and --help through the installed executable."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import majordomus
from conftest import RunMajordomus

ROOT = Path(__file__).resolve().parents[1]


def test_version_prints_the_package_version_and_the_changelog_knows_it(tmp_path: Path,
                                                                         run_majordomus: RunMajordomus) -> None:
    done = run_majordomus("--version", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode() == f"majordomus {majordomus.__version__}\n"
    assert re.fullmatch(r"\d+\.\d+\.\d+", majordomus.__version__)
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert f"## {majordomus.__version__}" in changelog


def test_the_license_file_is_the_one_pyproject_declares() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["license"]
    assert declared == "MIT"
    assert (ROOT / "LICENSE").read_text(encoding="utf-8").startswith("MIT License\n")


def test_help_lists_every_command_and_exits_zero(tmp_path: Path, run_majordomus: RunMajordomus) -> None:
    done = run_majordomus("--help", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    text = done.stdout.decode() + done.stderr.decode()
    for words in ("init", "update", "doctor", "capture session", "capture prompt", "capture install"):
        assert words in text, words


def test_an_unknown_command_is_a_usage_error_that_says_what_to_do(tmp_path: Path,
                                                                   run_majordomus: RunMajordomus) -> None:
    done = run_majordomus("frobnicate", cwd=tmp_path)
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert done.stderr.decode() == "majordomus: unknown command 'frobnicate'; try 'majordomus --help'\n"
