"""Helpers shared by tests (importable as a plain module: tests/ is on sys.path through rootdir conftest)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

BIN_DIR = Path(sys.executable).parent
MAJORDOMUS = BIN_DIR / "majordomus"
MAJORDOMUS_MCP = BIN_DIR / "majordomus-mcp"


def session_payload(ps: str, **extra: Any) -> bytes:
    return json.dumps({"session_id": ps, **extra}).encode()


def front_matter(path: Path) -> dict[str, Any]:
    text = path.read_text(encoding="utf-8")
    assert text.startswith("---\n"), path
    return yaml.safe_load(text[4: text.index("\n---", 4)])


def records(repo: Path) -> dict[str, dict[str, Any]]:
    """Every closed record, by its repository-relative path, read with a real YAML parser."""
    return {f".ai/repo/sessions/{p.name}": front_matter(p)
            for p in sorted((repo / ".ai/repo/sessions").glob("2*.md"))}


def open_files(repo: Path) -> dict[str, dict[str, Any]]:
    paths = sorted((repo / ".ai/local/state/sessions-open").glob("*.yaml"))
    return {p.name: yaml.safe_load(p.read_text()) for p in paths}


def make_initialised(path: Path, run_majordomus, origin: str | None = None) -> Path:
    path.mkdir(parents=True)
    for args in (["init", "-q", "-b", "main"], ["commit", "-q", "--allow-empty", "-m", "first"]):
        subprocess.run(["git", "-C", str(path), *args], check=True)
    if origin:
        subprocess.run(["git", "-C", str(path), "remote", "add", "origin", origin], check=True)
    assert run_majordomus("init", cwd=path).returncode == 0
    return path
