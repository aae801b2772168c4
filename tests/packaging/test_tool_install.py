"""majordomus installed the way command-line tools are installed: `pipx install` and `uv tool install` of the built
wheel, into a scratch HOME, then used as a person would from that install alone (its bin folder and the system's on
PATH, nothing of the test's virtualenv): `init`, `capture install --provider claude-code`, the wired hook commands
run by `sh -c` exactly as Claude Code runs them, and `doctor`. An upgrade of the tool (a newer wheel installed over
it) keeps the wired hooks working without installing them again: the commands name the tool's own virtualenv,
whose path an upgrade keeps. A shared file's command (Gemini CLI's, which finds the launcher on PATH through the
tool's bin link) starts the tool's interpreter without `site` as well: a `.pth` file in the tool's environment,
which only `site` would run, never runs from a hook.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SYSTEM_PATH = "/usr/bin:/bin"
UNREACHABLE = re.compile(r"(?i)(connection|resolve|network is unreachable|name or service|dns|failed to fetch|"
                         r"temporary failure|could not find a version)")

pytestmark = [pytest.mark.slow, pytest.mark.network]


def build_wheel(out: Path, version: str | None = None) -> Path:
    """This checkout's wheel; with `version`, the same sources under another version number (an upgrade). Built
    from a copy, so that two builds at once (xdist) never share setuptools' build/ folder in the checkout."""
    source = out / f"src-{version or 'this'}"
    source.mkdir()
    for part in ("src", "scripts", "pyproject.toml", "README.md", "LICENSE"):
        if (ROOT / part).is_dir():
            shutil.copytree(ROOT / part, source / part, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(ROOT / part, source / part)
    if version is not None:
        init = source / "src/majordomus/__init__.py"
        init.write_text(re.sub(r'__version__ = "[^"]+"', f'__version__ = "{version}"', init.read_text()))
    wheels = out / f"wheels-{version or 'this'}"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(source)],
                   check=True, capture_output=True, timeout=300)
    [wheel] = wheels.glob("majordomus-*.whl")
    return wheel


def base_python() -> str:
    """The interpreter this virtualenv was made from: a tool gets a virtualenv of its own from it."""
    name = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    found = Path(sys.base_prefix) / "bin" / name
    return str(found) if found.exists() else name


class Tool:
    """pipx or uv, with every folder it writes under a scratch HOME."""

    def __init__(self, name: str, home: Path) -> None:
        self.name, self.home = name, home
        self.bin = home / ".local" / "bin"
        self.env = {"HOME": str(home), "PATH": f"{Path(sys.executable).parent}{os.pathsep}{SYSTEM_PATH}",
                    "PIPX_HOME": str(home / ".local/pipx"), "PIPX_BIN_DIR": str(self.bin),
                    "PIPX_MAN_DIR": str(home / ".local/share/man"), "PIPX_DEFAULT_PYTHON": base_python(),
                    "UV_TOOL_DIR": str(home / ".local/share/uv/tools"), "UV_TOOL_BIN_DIR": str(self.bin),
                    "UV_PYTHON": base_python(), "UV_PYTHON_DOWNLOADS": "never", "UV_NO_PROGRESS": "1",
                    "XDG_DATA_HOME": str(home / ".local/share"), "XDG_CACHE_HOME": str(home / ".cache")}
        # how this machine reaches its registry (a proxy, its certificates, pip's index settings) carries over
        self.env.update({k: v for k, v in os.environ.items() if re.search(r"(?i)proxy|cert|ssl|^pip_|^uv_", k)})
        if "SSL_CERT_FILE" in os.environ:
            self.env.setdefault("UV_NATIVE_TLS", "1")  # uv trusts the system's certificates, as pip does

    def install(self, wheel: Path) -> None:
        command = ([sys.executable, "-m", "pipx", "install", "--force", str(wheel)] if self.name == "pipx" else
                   [str(Path(sys.executable).parent / "uv"), "tool", "install", "--force", str(wheel)])
        done = subprocess.run(command, env=self.env, capture_output=True, text=True, timeout=600, check=False)
        if done.returncode != 0:
            said = done.stdout + done.stderr
            if UNREACHABLE.search(said):
                pytest.skip(f"{self.name} could not reach the package registry for majordomus's dependencies: "
                            f"{said.strip().splitlines()[-1] if said.strip() else done.returncode}")
            raise AssertionError(f"{self.name} install failed ({done.returncode}): {said}")

    def person_env(self) -> dict[str, str]:
        """What a person's shell has after the tool's install: its bin folder on PATH, nothing of ours besides."""
        return {"HOME": str(self.home), "PATH": f"{self.bin}{os.pathsep}{SYSTEM_PATH}", "LANG": "C.UTF-8",
                "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x.invalid", "GIT_COMMITTER_NAME": "t",
                "GIT_COMMITTER_EMAIL": "t@x.invalid"}


def run(argv: list[str], cwd: Path, env: dict[str, str], payload: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(argv, cwd=cwd, env=env, input=payload, capture_output=True, timeout=120, check=False)


def commands(repo: Path) -> dict[str, str]:
    """Claude Code's per-person file, as install wrote it: event -> the command its handler runs."""
    doc = json.loads((repo / ".claude/settings.local.json").read_text())
    return {event: handler["command"] for event, groups in doc["hooks"].items() for group in groups
            for handler in group["hooks"] if "majordomus-hook" in handler["command"]}


def sitting(repo: Path, env: dict[str, str], session: str) -> None:
    """Start, a prompt and an end, each through `sh -c` with the wired command, as Claude Code runs them."""
    wired = commands(repo)
    for event, body in (("SessionStart", {"source": "startup"}),
                        ("UserPromptSubmit", {"prompt": f"tidy the parser ({session})"}),
                        ("Stop", {"stop_hook_active": False}),
                        ("SessionEnd", {"reason": "logout"})):
        payload = json.dumps({"session_id": session, "hook_event_name": event, "cwd": str(repo), **body}).encode()
        done = run(["sh", "-c", wired[event]], repo, env, payload)
        assert (done.returncode, done.stderr) == (0, b""), (event, done)


def shared_sitting(repo: Path, env: dict[str, str], site_packages: Path, session: str) -> bool:
    """Gemini CLI's start and end through `sh -c` with its shared command; whether `site` ran in any of them."""
    doc = json.loads((repo / ".gemini/settings.json").read_text())
    wired = {event: handler["command"] for event, groups in doc["hooks"].items() for group in groups
             for handler in group["hooks"] if "majordomus-hook" in handler["command"]}
    marker = repo.parent / "site-ran"
    (site_packages / "zz-marker.pth").write_text(f"import pathlib; pathlib.Path({str(marker)!r}).touch()\n")
    try:
        for event, body in (("SessionStart", {"source": "startup"}), ("SessionEnd", {"reason": "exit"})):
            payload = json.dumps({"session_id": session, "hook_event_name": event, "cwd": str(repo), **body}).encode()
            done = run(["sh", "-c", wired[event]], repo, env, payload)
            assert (done.returncode, done.stderr) == (0, b""), (event, done)
    finally:
        (site_packages / "zz-marker.pth").unlink()
    return marker.exists()


def episodes(repo: Path, env: dict[str, str]) -> list[dict[str, object]]:
    done = run(["majordomus", "episodes", "--json"], repo, env)
    assert done.returncode == 0, done.stderr
    listed = json.loads(done.stdout)
    return list(listed["episodes"] if isinstance(listed, dict) else listed)


@pytest.mark.parametrize("tool", ["pipx", "uv"])
def test_a_tool_install_wires_hooks_that_record_and_survive_an_upgrade(tmp_path: Path, tool: str) -> None:
    installer = Tool(tool, tmp_path / "home")
    installer.install(build_wheel(tmp_path))
    env = installer.person_env()
    for name in ("majordomus", "majordomus-mcp", "majordomus-hook"):
        assert (installer.bin / name).exists(), f"{tool} put no {name} in {installer.bin}"
    repo = tmp_path / "repo"
    repo.mkdir()
    for argv in (["git", "init", "-q", "-b", "main"], ["git", "commit", "-q", "--allow-empty", "-m", "first"],
                 ["majordomus", "init"], ["majordomus", "capture", "install", "--provider", "claude-code"]):
        done = run(argv, repo, env)
        assert done.returncode == 0, (argv, done)
    wired = commands(repo)
    assert all(str(tmp_path / "home") in c and " -IS " in c for c in wired.values()), wired  # the tool's own python
    sitting(repo, env, "first")
    [first] = episodes(repo, env)
    assert first["outcome"] == "closed", first
    prompts = list((repo / ".ai/local/prompts").glob("*.json"))
    assert len(prompts) == 1 and "tidy the parser (first)" in prompts[0].read_text()
    doctor = run(["majordomus", "doctor"], repo, env).stdout.decode()
    hooks = [line for line in doctor.splitlines() if " hooks " in f" {line} "]
    assert hooks and all(line.startswith("OK ") for line in hooks), doctor
    assert not (repo / ".ai/local/hook-failures.log").exists()

    assert run(["majordomus", "capture", "install", "--provider", "gemini"], repo, env).returncode == 0
    [site_packages] = {p.parent for p in (tmp_path / "home").rglob("site-packages/majordomus_hook.py")}
    assert not shared_sitting(repo, env, site_packages, "shared-1")
    assert [e["outcome"] for e in episodes(repo, env)] == ["closed", "closed"]

    installer.install(build_wheel(tmp_path, "99.0.0"))  # the upgrade: hooks left as they were
    assert run(["majordomus", "--version"], repo, env).stdout.decode().strip() == "majordomus 99.0.0"
    assert commands(repo) == wired
    sitting(repo, env, "second")
    assert [e["outcome"] for e in episodes(repo, env)] == ["closed"] * 3
    assert len(list((repo / ".ai/local/prompts").glob("*.json"))) == 2
    assert not (repo / ".ai/local/hook-failures.log").exists()
    doctor = run(["majordomus", "doctor"], repo, env).stdout.decode()
    assert all(line.startswith("OK ") for line in doctor.splitlines() if " hooks " in f" {line} "), doctor
