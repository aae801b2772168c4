"""A symlinked `.ai`, `.ai/local`, `.ai/local/state`, `.ai/repo` or locks directory is refused,
never followed: the hooks and the commands say which link to replace and write nothing where it points."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import MAJORDOMUS

LINKED = [".ai", ".ai/local", ".ai/local/state", ".ai/repo", ".ai/local/state/locks"]


def run(repo: Path, *args: str, payload: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([str(MAJORDOMUS), *args], cwd=repo, input=json.dumps(payload or {}).encode(),
                          capture_output=True, timeout=60)


def snapshot(where: Path) -> dict[str, bytes]:
    return {str(p.relative_to(where)): p.read_bytes() if p.is_file() else b"" for p in sorted(where.rglob("*"))}


@pytest.mark.parametrize("linked", LINKED)
def test_a_symlinked_layer_directory_is_refused_by_hooks_and_commands(initialised_repo: Path, tmp_path: Path,
                                                                      linked: str) -> None:
    """1. the directory moved outside the repository and a symlink left in its place; 2. a start hook, a prompt
    hook, `capture recover`, `history --rotate`. Result: each exits 15 with one sentence naming the link and
    saying to replace it, no traceback; nothing under the link's target changes."""
    (initialised_repo / ".ai/local/state/locks").mkdir(exist_ok=True)
    source = initialised_repo / linked
    target = tmp_path / "elsewhere"
    shutil.move(str(source), str(target))
    source.symlink_to(target, target_is_directory=True)
    before = snapshot(target)
    for args, payload in ((("capture", "session", "--provider", "claude-code", "--event", "start"),
                           {"session_id": "linked", "source": "startup"}),
                          (("capture", "prompt", "--provider", "claude-code"),
                           {"session_id": "linked", "prompt": "hello"}),
                          (("capture", "recover"), None), (("history", "--rotate"), None)):
        done = run(initialised_repo, *args, payload=payload)
        said = (done.stdout + done.stderr).decode()
        assert done.returncode == 15, (args, said)
        assert "symbolic link" in said and "Traceback" not in said and "replace it" in said, (args, said)
    assert snapshot(target) == before
