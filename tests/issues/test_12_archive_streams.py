"""Issue 12 item 4: reconcile, prune, render and doctor stream the archive: their peak memory does not grow with
the number of records (a list of every parsed record cost ~4.5 KiB a record: 450 MiB at 100k).

Measured on the real executables (peak RSS of the child from wait4) at 1k and 12k records; the growth between
the two must stay far below what holding every record costs (~50 MiB for the 11k more). No wall-clock here."""

from __future__ import annotations

import os
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from majordomus.archive import record as rec
from majordomus.archive.render import render_md, render_yaml
from majordomus.identity import rfc3339
from majordomus.layout import Layout
from support import MAJORDOMUS

pytestmark = pytest.mark.slow

COMMANDS = (("doctor",), ("capture", "reconcile", "--dry-run"), ("capture", "reconcile"), ("capture", "prune"),
            ("capture", "render", "--force"))


def fill(repo: Path, count: int) -> None:
    """`count` records over 200 days back from now (prune takes the oldest tenth), every 10th without its
    link (reconcile rewrites it), every 10th without renderings (render writes them)."""
    layout = Layout(repo)
    layout.prompts_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(layout.prompts_dir, 0o700)
    layout.policy_file.write_text("prompts:\n  retention_max_days: 180\n  retention_max_bytes: 1000000000\n")
    base = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(days=200)
    for i in range(count):
        moment = base + timedelta(seconds=i * 200 * 86400 // count)
        members = {"schema": rec.SCHEMA, "started_at": rfc3339(moment), "provider": "claude-code",
                   "event": "UserPromptSubmit", "id": f"id-{i}", "session": f"ps-{i * 20 // count}",
                   "episode": None, "episode_link": "orphan", "text": f"Prompt {i}: refactor the parser. " * 6}
        if i % 10 == 5:
            del members["episode_link"]
        record = rec.PromptRecord.from_members(members)
        stem = f"{moment:%Y%m%d%H%M%S}-prompt-{i}"
        files = {".json": rec.dumps(record)}
        if i % 10 != 7:
            files.update({".md": render_md(record, stem).encode(), ".yaml": render_yaml(record, stem).encode()})
        for suffix, data in files.items():
            fd = os.open(layout.prompts_dir / f"{stem}{suffix}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            os.write(fd, data)
            os.close(fd)


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
    fill(small, 1000)
    fill(big, 12000)
    for args in COMMANDS:
        grew = child_peak(big, *args) - child_peak(small, *args)
        assert grew < 15, f"{' '.join(args)}: peak RSS grew {grew:.1f} MiB from 1k to 12k records"
    after = [p for p in (Layout(big).prompts_dir).iterdir() if p.suffix == ".json"]
    assert len(after) == 12000  # no record lost
