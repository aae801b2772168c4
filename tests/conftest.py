"""Fixtures that build a real world: a temp git repository, HOME inside tmp_path, the installed executables."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

BIN_DIR = Path(sys.executable).parent
REAL_CLIENTS = Path(__file__).parent / "real_clients"
MAJORDOMUS = BIN_DIR / "majordomus"
MAJORDOMUS_MCP = BIN_DIR / "majordomus-mcp"

RunMajordomus = Callable[..., subprocess.CompletedProcess]


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """tests/real_clients (the four npm clients, minutes of real runs) only when named, as `make test-clients`
    does: a plain `pytest` or `make test` stays fast."""
    if collection_path != REAL_CLIENTS:
        return None
    here = Path(config.invocation_params.dir)
    named = [(here / arg.split("::")[0]).resolve() for arg in config.args]
    return None if any(path.is_relative_to(REAL_CLIENTS) for path in named) else True


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """No test reads or writes the developer's own HOME or git configuration."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Test Person")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "test@example.invalid")
    monkeypatch.setenv("GIT_COMMITTER_NAME", "Test Person")
    monkeypatch.setenv("GIT_COMMITTER_EMAIL", "test@example.invalid")
    monkeypatch.setenv("PATH", f"{BIN_DIR}{os.pathsep}{os.environ.get('PATH', '')}")
    for name in ("MAJORDOMUS_SESSION_DRY_RUN", "CLAUDE_CODE_SESSION_ID", "MAJORDOMUS_PROVIDER_SESSION"):
        monkeypatch.delenv(name, raising=False)
    yield home


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def make_repo(path: Path, origin: str | None = None) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    (path / "README.md").write_text("a repository for a test\n")
    git(path, "add", "README.md")
    git(path, "commit", "-q", "-m", "first commit")
    if origin:
        git(path, "remote", "add", "origin", origin)
    return path


@pytest.fixture
def git_repo(tmp_path: Path) -> Path:
    """A real repository with one commit on `main`."""
    return make_repo(tmp_path / "repo")


@pytest.fixture
def run_majordomus() -> RunMajordomus:
    """Run the installed `majordomus` executable: `run_majordomus("init", cwd=repo, input=b"...")`."""

    def run(*args: str, cwd: Path, input: bytes | None = None, env: dict[str, str] | None = None,
            timeout: float = 60) -> subprocess.CompletedProcess:
        full_env = {**os.environ, **(env or {})}
        return subprocess.run([str(MAJORDOMUS), *args], cwd=cwd, input=input if input is not None else b"",
                              capture_output=True, env=full_env, timeout=timeout, check=False)

    return run


@pytest.fixture
def initialised_repo(git_repo: Path, run_majordomus: RunMajordomus) -> Path:
    """A repository after `majordomus init`, with the layer committed."""
    done = run_majordomus("init", cwd=git_repo)
    assert done.returncode == 0, done.stderr
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-q", "-m", "majordomus layer")
    return git_repo
