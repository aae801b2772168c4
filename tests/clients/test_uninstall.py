"""`capture uninstall` through the real executable: it takes out exactly what `capture install` put in.

Install then uninstall leaves every file of the repository byte-identical (the person's own files, git's
exclude file, and no file or directory of install's left behind); a file a person changed since keeps their
change and loses only majordomus's entries; `--dry-run` changes nothing; without install's record (an older
install) the entries are found by their shape. The git trailer hook gives a person's own hook back.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from clients.samples import INSTALLABLE, SAMPLES
from majordomus.clients.providers import get_provider
from support import MAJORDOMUS


def majordomus(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(MAJORDOMUS), *args], cwd=repo, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done


def tree(repo: Path) -> dict[str, tuple[str, bytes | None, int]]:
    """Every directory and file of the worktree and of git's own hooks and info/, with bytes and modes."""
    out: dict[str, tuple[str, bytes | None, int]] = {}
    for here, dirs, files in os.walk(repo):
        rel = os.path.relpath(here, repo)
        if rel == ".git":
            dirs[:] = [d for d in dirs if d in ("hooks", "info")]
        for d in dirs:
            path = Path(here) / d
            out[os.path.relpath(path, repo)] = ("dir", None, path.lstat().st_mode)
        for f in files:
            path = Path(here) / f
            name = os.path.relpath(path, repo)
            if name.startswith(".git/") and not name.startswith((".git/hooks/", ".git/info/")):
                continue
            out[name] = ("file", path.read_bytes(), path.lstat().st_mode)
    return out


def seed_foreign(repo: Path, name: str) -> None:
    """The client's files as a person already has them, in their own formatting (compact JSON, tabs, CRLF)."""
    p = get_provider(name)
    assert p.config
    path = repo / p.config
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(SAMPLES[name]["foreign"], separators=(",", ":")))  # one line, no spaces
    if p.mcp_config and p.mcp_config != p.config:
        mcp = repo / p.mcp_config
        mcp.parent.mkdir(parents=True, exist_ok=True)
        if mcp.suffix == ".toml":
            mcp.write_bytes(b'# mine\r\nmodel = "o3"\r\n\r\n[mcp_servers.other]\r\ncommand = "other"\r\n')
        else:
            mcp.write_text('{\n\t"mcpServers": {"other": {"command": "other-server"}},\n\t"inputs": []\n}')
    (repo / ".git/info/exclude").write_bytes(b"# git ls-files --others --exclude-from=.git/info/exclude\n*.swp")


@pytest.mark.parametrize("name", INSTALLABLE)
def test_install_then_uninstall_leaves_a_persons_files_byte_identical(initialised_repo: Path, name: str) -> None:
    seed_foreign(initialised_repo, name)
    os.chmod(initialised_repo / str(get_provider(name).config), 0o600)
    before = tree(initialised_repo)
    majordomus(initialised_repo, "capture", "install", "--provider", name)
    assert tree(initialised_repo) != before
    said = majordomus(initialised_repo, "capture", "uninstall", "--provider", name).stdout
    assert "restored" in said
    assert tree(initialised_repo) == before


@pytest.mark.parametrize("name", INSTALLABLE)
def test_install_then_uninstall_in_a_repository_without_client_files_leaves_nothing(initialised_repo: Path,
                                                                                    name: str) -> None:
    before = tree(initialised_repo)
    majordomus(initialised_repo, "capture", "install", "--provider", name)
    said = majordomus(initialised_repo, "capture", "uninstall", "--provider", name).stdout
    assert "install created it" in said
    assert tree(initialised_repo) == before  # no file, no directory, no install record left


def test_every_client_installed_then_uninstalled_leaves_the_repository_as_it_was(initialised_repo: Path) -> None:
    """Clients that share a folder (`.github/` for Copilot's hooks and MCP file) or a file (git's exclude)."""
    before = tree(initialised_repo)
    for name in INSTALLABLE:
        majordomus(initialised_repo, "capture", "install", "--provider", name)
    for name in reversed(INSTALLABLE[1:]):
        majordomus(initialised_repo, "capture", "uninstall", "--provider", name)
    majordomus(initialised_repo, "capture", "uninstall", "--provider", INSTALLABLE[0])
    assert tree(initialised_repo) == before


def hook_doc(repo: Path, name: str) -> dict[str, Any]:
    rel = get_provider(name).hooks_file()
    assert rel
    return dict(json.loads((repo / rel).read_text()))


@pytest.mark.parametrize("name", INSTALLABLE)
def test_a_file_changed_since_install_keeps_the_change_and_loses_only_majordomus(initialised_repo: Path,
                                                                                name: str) -> None:
    seed_foreign(initialised_repo, name)
    p = get_provider(name)
    majordomus(initialised_repo, "capture", "install", "--provider", name)
    rel = p.hooks_file()
    assert rel
    doc = hook_doc(initialised_repo, name)
    doc["added-after-install"] = {"by": "the person"}
    (initialised_repo / rel).write_text(json.dumps(doc, indent=2))
    said = majordomus(initialised_repo, "capture", "uninstall", "--provider", name).stdout
    assert f"{rel}: removed majordomus's hooks" in said and "kept the rest" in said
    after = hook_doc(initialised_repo, name)
    assert "majordomus" not in json.dumps(after.get("hooks", {}))
    assert after["added-after-install"] == {"by": "the person"}
    if rel == p.config:  # the person's own file from before: all of it is still there
        for key, value in SAMPLES[name]["foreign"].items():
            assert after[key] == value, key


def test_dry_run_says_what_would_go_and_changes_nothing(initialised_repo: Path) -> None:
    majordomus(initialised_repo, "capture", "install", "--provider", "gemini")
    installed = tree(initialised_repo)
    said = majordomus(initialised_repo, "capture", "uninstall", "--provider", "gemini", "--dry-run").stdout
    assert said.splitlines() and all("would remove" in line or "would restore" in line for line in said.splitlines())
    assert ".gemini/settings.json" in said
    assert tree(initialised_repo) == installed


def test_without_installs_record_the_entries_are_found_by_their_shape(initialised_repo: Path) -> None:
    """An install older than the record: its hooks, MCP entry and exclude line still go; the person's stay."""
    seed_foreign(initialised_repo, "claude-code")
    majordomus(initialised_repo, "capture", "install", "--provider", "claude-code")
    record = initialised_repo / ".ai/local/state/installed/claude-code.json"
    record.unlink()
    said = majordomus(initialised_repo, "capture", "uninstall", "--provider", "claude-code").stdout
    assert "removed majordomus's hooks" in said and "removed the MCP server majordomus" in said
    mcp = json.loads((initialised_repo / ".mcp.json").read_text())
    assert mcp["mcpServers"] == {"other": {"command": "other-server"}} and mcp["inputs"] == []
    exclude = (initialised_repo / ".git/info/exclude").read_text()
    assert "/.claude/settings.local.json" not in exclude and "*.swp" in exclude


def test_uninstall_of_a_client_never_wired_says_so(initialised_repo: Path) -> None:
    before = tree(initialised_repo)
    said = majordomus(initialised_repo, "capture", "uninstall", "--provider", "codex").stdout
    assert "nothing of majordomus's is wired" in said
    assert tree(initialised_repo) == before


def test_uninstall_git_gives_a_persons_own_hook_back_byte_for_byte(initialised_repo: Path) -> None:
    own = initialised_repo / ".git/hooks/prepare-commit-msg"
    own.write_bytes(b"#!/bin/sh\n# my own\nexit 0\n")
    own.chmod(0o750)
    before = tree(initialised_repo)
    majordomus(initialised_repo, "capture", "install", "--git")
    assert b"majordomus" in own.read_bytes()
    said = majordomus(initialised_repo, "capture", "uninstall", "--git").stdout
    assert "put your prepare-commit-msg hook back" in said
    assert tree(initialised_repo) == before
