"""Each hook makes durable what cannot be rebuilt (the bytes and the name of its record) and
spends no fsync on what can (renderings, the open file's refresh). Counted with strace on the real executable."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from support import MAJORDOMUS

pytestmark = pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed")


def fsynced(repo: Path, payload: dict[str, object], *args: str) -> list[str]:
    """The paths the command fsynced, relative to the repository (a temp file by the name it publishes)."""
    trace = repo.parent / "trace.txt"
    done = subprocess.run(["strace", "-f", "-y", "-qq", "-e", "trace=fsync,fdatasync", "-o", str(trace),
                           str(MAJORDOMUS), *args], input=json.dumps(payload).encode(), capture_output=True, cwd=repo)
    assert done.returncode == 0, done.stderr.decode()
    out = []
    for line in trace.read_text().splitlines():
        if "fsync" in line and "<" in line:
            path = line.split("<", 1)[1].split(">", 1)[0]
            rel = str(Path(path).relative_to(repo.resolve())) if path.startswith(str(repo.resolve())) else path
            out.append(rel)
    return out


def test_each_hook_fsyncs_its_record_and_directory_and_nothing_rebuildable(initialised_repo: Path) -> None:
    session = ("capture", "session", "--provider", "claude-code", "--event")
    start = fsynced(initialised_repo, {"session_id": "fs", "source": "startup"}, *session, "start")
    assert [p.split("/")[-1].startswith(".") for p in start] == [True, True, False]  # two temp files, a directory
    assert start[0].startswith(".ai/local/session-contexts/") and ".ai/local/state/sessions-open/" in start[1]
    assert start[2] == ".ai/local/state/sessions-open"

    prompt = fsynced(initialised_repo, {"session_id": "fs", "prompt_id": "p", "prompt": "hello"},
                     "capture", "prompt", "--provider", "claude-code")
    assert len(prompt) == 2 and prompt[0].startswith(".ai/local/prompts/.") and ".json." in prompt[0]
    assert prompt[1] == ".ai/local/prompts"  # the record's name; no rendering, no open-file refresh

    assert fsynced(initialised_repo, {"session_id": "fs"}, *session, "turn") == []
    compact = fsynced(initialised_repo, {"session_id": "fs"}, *session, "compact")
    assert len(compact) == 1 and ".ai/local/state/sessions-open/" in compact[0]  # the count is nowhere else
    end = fsynced(initialised_repo, {"session_id": "fs", "reason": "logout"}, *session, "end")
    assert len(end) == 2 and end[0].startswith(".ai/repo/sessions/.") and end[1] == ".ai/repo/sessions"
