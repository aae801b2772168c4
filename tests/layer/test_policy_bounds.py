"""Huge policy numbers and huge policy files give one sentence, never a traceback, and never
stop a hook: the defaults hold until the person fixes the file, and doctor names what to fix."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from conftest import MAJORDOMUS

POLICY = ".ai/repo/policy.yaml"
HUGE = {
    "prompts.retention_max_days": "1000000",
    "prompts.retention_max_bytes": "9" * 40,
    "episodes.reattach_grace_seconds": "99999999999999999",
    "session.stale_after_hours": "99999999999999",
    "ledger.retention_max_lines": "9" * 5000,  # past Python's 4,300-digit limit for int()
}


def run(repo: Path, *args: str, payload: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([str(MAJORDOMUS), *args], cwd=repo, input=json.dumps(payload or {}).encode(),
                          capture_output=True, timeout=120)


def assert_no_traceback_anywhere(repo: Path, named: str) -> None:
    """A start hook opens; prune, doctor, recover, rotate and update each answer in a sentence (exit 0 or 10)."""
    start = run(repo, "capture", "session", "--provider", "claude-code", "--event", "start",
                payload={"session_id": "pol", "source": "startup"})
    assert start.returncode == 0 and b" opened at " in start.stderr, start.stderr
    for args in (("capture", "prune"), ("doctor",), ("capture", "recover"), ("history", "--rotate"), ("update",)):
        done = run(repo, *args)
        said = (done.stdout + done.stderr).decode()
        assert "Traceback" not in said and done.returncode in (0, 10), (args, done.returncode, said[-800:])
    doctor = (run(repo, "doctor").stdout).decode()
    assert named in doctor, doctor


@pytest.mark.parametrize("dotted", sorted(HUGE))
def test_a_huge_policy_number_is_named_and_the_default_holds(initialised_repo: Path, dotted: str) -> None:
    key = dotted.split(".", 1)[1]
    path = initialised_repo / POLICY
    path.write_text(re.sub(rf"^  {key}: .*$", f"  {key}: {HUGE[dotted]}", path.read_text(), flags=re.MULTILINE))
    assert_no_traceback_anywhere(initialised_repo, dotted if len(HUGE[dotted]) < 4000 else "does not parse")


def test_a_five_megabyte_policy_is_refused_unread(initialised_repo: Path) -> None:
    path = initialised_repo / POLICY
    path.write_text(path.read_text() + "# padding\n" * 500_000)
    assert_no_traceback_anywhere(initialised_repo, "larger than 64 KiB")


def test_a_sparse_gigabyte_policy_is_refused_unread(initialised_repo: Path) -> None:
    path = initialised_repo / POLICY
    with open(path, "r+b") as handle:
        handle.truncate(1 << 30)
    assert os.stat(path).st_size == 1 << 30
    assert_no_traceback_anywhere(initialised_repo, "larger than 64 KiB")
