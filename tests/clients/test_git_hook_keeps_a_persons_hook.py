"""`capture install --git` on a prepare-commit-msg hook a person wrote, however odd: the hook is kept byte for byte
(a link as the link itself, never what it points to) and chained, or install refuses with both files
byte-identical; `capture uninstall --git` gives the hook back as it was."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from support import MAJORDOMUS

HOOK = ".git/hooks/prepare-commit-msg"
CHAINED = ".git/hooks/prepare-commit-msg.majordomus-chained"

ODD = {
    "crlf": b"#!/bin/sh\r\n# mine\r\nexit 0\r\n",
    "no final newline": b"#!/bin/sh\nexit 0",
    "not utf-8": b"#!/bin/sh\n# caf\xe9 \xff\xfe\nexit 0\n",
    "empty": b"",
    "names majordomus but is not ours": b"#!/bin/sh\n# majordomus: prepare-commit-msg, my own copy\nexit 0\n",
}


def majordomus(repo: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([str(MAJORDOMUS), *args], cwd=repo, capture_output=True, timeout=60)


def state(path: Path) -> tuple[str, bytes | str, int]:
    """A file as its bytes and mode, a link as its target: what must come back."""
    if path.is_symlink():
        return "link", os.readlink(path), 0
    return "file", path.read_bytes(), path.stat().st_mode & 0o7777


@pytest.mark.parametrize("content", sorted(ODD))
def test_install_git_chains_a_persons_odd_hook_byte_for_byte_and_uninstall_gives_it_back(
        initialised_repo: Path, content: str) -> None:
    own = initialised_repo / HOOK
    own.write_bytes(ODD[content])
    own.chmod(0o750)
    before = state(own)
    done = majordomus(initialised_repo, "capture", "install", "--git")
    assert done.returncode == 0, done.stderr
    assert state(initialised_repo / CHAINED) == before
    assert b"majordomus" in own.read_bytes()
    back = majordomus(initialised_repo, "capture", "uninstall", "--git")
    assert back.returncode == 0, back.stderr
    assert state(own) == before and not (initialised_repo / CHAINED).exists()


@pytest.mark.parametrize("target", ["../../scripts/my-hook", "/nonexistent/elsewhere/hook"],
                         ids=["inside the repository", "outside it, dangling"])
def test_a_symlinked_hook_is_moved_as_the_link_never_followed(initialised_repo: Path, target: str) -> None:
    (initialised_repo / "scripts").mkdir(exist_ok=True)
    script = initialised_repo / "scripts/my-hook"
    script.write_bytes(b"#!/bin/sh\nexit 0\n")
    script.chmod(0o755)
    own = initialised_repo / HOOK
    own.symlink_to(target)
    done = majordomus(initialised_repo, "capture", "install", "--git")
    assert done.returncode == 0, done.stderr
    assert state(initialised_repo / CHAINED) == ("link", target, 0)
    assert script.read_bytes() == b"#!/bin/sh\nexit 0\n" and script.stat().st_mode & 0o7777 == 0o755
    assert majordomus(initialised_repo, "capture", "uninstall", "--git").returncode == 0
    assert state(own) == ("link", target, 0)


def test_install_git_refuses_when_a_chained_hook_is_there_already_and_touches_neither(
        initialised_repo: Path) -> None:
    own, chained = initialised_repo / HOOK, initialised_repo / CHAINED
    own.write_bytes(b"#!/bin/sh\r\nexit 0")
    chained.write_bytes(b"#!/bin/sh\nexit 1\n")
    before = (state(own), state(chained))
    done = majordomus(initialised_repo, "capture", "install", "--git")
    assert done.returncode == 15 and done.stderr.decode().count("\n") == 1, done.stderr
    assert (state(own), state(chained)) == before
