"""Fixtures that build a real world: a temp git repository, HOME inside tmp_path, the installed executables."""

from __future__ import annotations

import os
import shutil
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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The slow tests first (otherwise in collection order): with xdist a stress test of 15 s that starts last
    keeps one worker busy while the others have nothing left to do. Every test is order-independent."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


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


# The environment isolated_home gives a test, for the templates built once per session (per xdist worker).
GIT_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "Test Person", "GIT_AUTHOR_EMAIL": "test@example.invalid",
           "GIT_COMMITTER_NAME": "Test Person", "GIT_COMMITTER_EMAIL": "test@example.invalid"}


@pytest.fixture(scope="session")
def repo_templates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Built once per session (per xdist worker): a repository with one commit on `main`, and the same
    after `majordomus init` with the layer committed. Nothing in either records its own absolute path
    (repository_id and worktree_id are derived from the path when a command runs), so a copy is the
    repository a test would have built in place."""
    base = tmp_path_factory.mktemp("templates")
    home = base / "home"
    home.mkdir()
    env = {**os.environ, **GIT_ENV, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
           "PATH": f"{BIN_DIR}{os.pathsep}{os.environ.get('PATH', '')}"}
    for name in ("MAJORDOMUS_SESSION_DRY_RUN", "CLAUDE_CODE_SESSION_ID", "MAJORDOMUS_PROVIDER_SESSION", "GIT_DIR",
                 "GIT_WORK_TREE", "GIT_INDEX_FILE"):
        env.pop(name, None)

    def run(cwd: Path, *argv: str) -> None:
        subprocess.run(list(argv), cwd=cwd, env=env, capture_output=True, check=True, timeout=60)

    plain = base / "plain" / "repo"
    plain.mkdir(parents=True)
    run(plain, "git", "init", "-q", "-b", "main")
    (plain / "README.md").write_text("a repository for a test\n")
    run(plain, "git", "add", "README.md")
    run(plain, "git", "commit", "-q", "-m", "first commit")
    initialised = base / "initialised" / "repo"
    shutil.copytree(plain, initialised, symlinks=True)
    run(initialised, "git", "update-index", "-q", "--refresh")
    run(initialised, str(MAJORDOMUS), "init")
    run(initialised, "git", "add", "-A")
    run(initialised, "git", "commit", "-q", "-m", "majordomus layer")
    return {"plain": plain, "initialised": initialised}


def copy_repo(template: Path, path: Path) -> Path:
    """A copy of a template repository at `path`, modes exact (the layer's 0700/0600 private files), its index
    refreshed: the copy's files have new inodes and ctimes, and a fresh index is what building in place leaves."""
    shutil.copytree(template, path, symlinks=True)
    git(path, "update-index", "-q", "--refresh")
    return path


@pytest.fixture
def git_repo(tmp_path: Path, repo_templates: dict[str, Path]) -> Path:
    """A real repository with one commit on `main` (a copy of the session's template)."""
    return copy_repo(repo_templates["plain"], tmp_path / "repo")


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
def initialised_repo(tmp_path: Path, repo_templates: dict[str, Path]) -> Path:
    """A repository after `majordomus init`, with the layer committed (a copy of the session's template).
    It is at the same path as git_repo: a test takes one or the other."""
    return copy_repo(repo_templates["initialised"], tmp_path / "repo")
