"""Wired hooks never get in a person's way (SPEC §7): where majordomus is missing or broken, each hook command
that `capture install` wrote does nothing, says nothing, and exits 0 (every client's "no opinion"); a failure
it can see is a line in `.ai/local/hook-failures.log`, which doctor reports with the repair.

Each command runs as a client runs it: the very string from the client's own file, through `sh -c`, with the
client's payload on stdin.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import majordomus
from clients.samples import INSTALLABLE, SAMPLES, session_bytes
from majordomus.clients.hook_command import local_command, parse, shared_command
from majordomus.clients.providers import get_provider
from support import MAJORDOMUS, MAJORDOMUS_HOOK, broken_install, open_files

SYSTEM_PATH = "/usr/bin:/bin"


def install(repo: Path, provider: str) -> None:
    done = subprocess.run([str(MAJORDOMUS), "capture", "install", "--provider", provider], cwd=repo,
                          capture_output=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr


def hook_file(repo: Path, provider: str) -> Path:
    p = get_provider(provider)
    rel = p.hooks_file()
    assert rel
    return repo / rel


def start_command(repo: Path, provider: str) -> str:
    """The command the client's own file runs at its session start."""
    p = get_provider(provider)
    assert p.session is not None and p.install is not None
    event = p.session.events["start"][0]
    doc: dict[str, Any] = json.loads(hook_file(repo, provider).read_text())
    key = SAMPLES[provider]["wired"]["command_key"]
    for entry in doc["hooks"][event]:
        for handler in entry.get("hooks", [entry]):
            if "--event start" in handler.get(key, ""):
                return str(handler[key])
    raise AssertionError(f"no start hook in {hook_file(repo, provider)}")


def run_hook(repo: Path, command: str, payload: bytes, **env: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["sh", "-c", command], cwd=repo, input=payload, capture_output=True, timeout=60,
                          env={**os.environ, **env}, check=False)


def failures(repo: Path) -> list[str]:
    path = repo / ".ai/local/hook-failures.log"
    return path.read_text().splitlines() if path.exists() else []


def doctor_lines(repo: Path, **env: str) -> list[str]:
    done = subprocess.run([str(MAJORDOMUS), "doctor"], cwd=repo, capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env}, check=False)
    return [line for line in done.stdout.splitlines() if " hooks " in f" {line} "]


def run_from(repo: Path, command: str, payload: bytes, bin_dir: Path) -> subprocess.CompletedProcess[bytes]:
    """The hook command as it runs from the install in `bin_dir`: a shared one finds that launcher first on PATH, a
    per-person one names it (and its interpreter) by path, as install would have written it there."""
    found = parse(command)
    assert found is not None
    if os.sep in found.executable:
        command = command.replace(found.executable, str(bin_dir / MAJORDOMUS_HOOK.name))
    if found.interpreter is not None:
        command = command.replace(found.interpreter, str(bin_dir / "python"))
    return run_hook(repo, command, payload, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")


SHARED_HOOKS = [n for n in INSTALLABLE if not (get_provider(n).install and get_provider(n).install.local_config)]


@pytest.mark.parametrize("name", SHARED_HOOKS)
def test_a_hook_on_a_clone_without_majordomus_does_nothing_and_says_nothing(initialised_repo: Path,
                                                                            name: str) -> None:
    install(initialised_repo, name)
    done = run_hook(initialised_repo, start_command(initialised_repo, name),
                    session_bytes(name, "start", f"{name}-1"), PATH=SYSTEM_PATH)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    assert open_files(initialised_repo) == {}


def test_a_clone_gets_no_per_person_hook_file(initialised_repo: Path, tmp_path: Path) -> None:
    """Claude Code's hooks live in its per-person file, which install keeps out of git: a teammate's clone has
    only the shared `.mcp.json`, so nothing runs a hook until that teammate installs majordomus."""
    install(initialised_repo, "claude-code")
    subprocess.run(["git", "-C", str(initialised_repo), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(initialised_repo), "commit", "-q", "-m", "wired"], check=True)
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(initialised_repo), str(clone)], check=True)
    assert (clone / ".mcp.json").exists() and not (clone / ".claude/settings.local.json").exists()


@pytest.mark.parametrize("name", INSTALLABLE)
def test_a_hook_whose_package_does_not_import_fails_open_and_is_logged(initialised_repo: Path, tmp_path: Path,
                                                                       name: str) -> None:
    broken = broken_install(tmp_path, {"majordomus/__init__.py": "raise ImportError('a half-finished upgrade')\n"})
    install(initialised_repo, name)
    done = run_from(initialised_repo, start_command(initialised_repo, name),
                    session_bytes(name, "start", f"{name}-1"), broken)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    [line] = failures(initialised_repo)
    assert f"capture session --provider {name} --event start: majordomus cannot be imported (ImportError: a " \
           "half-finished upgrade); reinstall it" in line
    assert (initialised_repo / ".ai/local/hook-failures.log").stat().st_mode & 0o777 == 0o600
    [fail] = [ln for ln in doctor_lines(initialised_repo) if ln.startswith("FAIL")]
    assert "hook-failures.log — 1 hook run(s) failed open" in fail and "cannot be imported" in fail


def test_a_launcher_with_nothing_of_majordomus_beside_it_fails_open_silently(initialised_repo: Path,
                                                                            tmp_path: Path) -> None:
    """Neither the launcher's module nor the package where the launcher looks: exit 0, nothing said, no record."""
    broken = broken_install(tmp_path, {})
    [module] = (broken.parent / "lib").glob("python3.*/site-packages/majordomus_hook.py")
    module.unlink()
    install(initialised_repo, "claude-code")
    done = run_from(initialised_repo, start_command(initialised_repo, "claude-code"),
                    session_bytes("claude-code", "start", "cc-1"), broken)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    assert open_files(initialised_repo) == {} and failures(initialised_repo) == []


def test_a_hook_that_crashes_inside_fails_open_and_names_where(initialised_repo: Path, tmp_path: Path) -> None:
    """A bug of ours in the middle of a hook: the traceback never reaches the person, the line names the frame."""
    broken = broken_install(tmp_path, {  # majordomus itself, and a .pth that plants a bug in it
        "a-majordomus.pth": str(Path(majordomus.__file__).parent.parent) + "\n",
        "b-crash.pth": "import crash\n",
        "crash.py": "import majordomus.episodes.hook as hook\n"
                    "def crash(*args, **kwargs):\n    raise ZeroDivisionError('a value from the payload')\n"
                    "hook.run_session = crash\n"})
    install(initialised_repo, "gemini")
    done = run_from(initialised_repo, start_command(initialised_repo, "gemini"),
                    session_bytes("gemini", "start", "g-1"), broken)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    [line] = failures(initialised_repo)
    assert "the hook crashed (ZeroDivisionError at " in line
    assert "a value from the payload" not in line  # where it failed, never what it held


def test_a_hook_that_exits_with_a_usage_error_tells_the_client_0(initialised_repo: Path) -> None:
    """Exit 2 blocks the person's prompt in Claude Code and Gemini CLI: the launcher never passes it on."""
    done = subprocess.run([str(MAJORDOMUS_HOOK), "capture", "session", "--provider", "gemini", "--event", "nope"],
                          cwd=initialised_repo, input=b"{}", capture_output=True, timeout=60, check=False)
    assert done.returncode == 0 and done.stdout == b""
    [line] = failures(initialised_repo)
    assert "exited 2" in line and "the client was told 0" in line


def test_a_per_person_hook_whose_launcher_is_gone_does_nothing(initialised_repo: Path) -> None:
    install(initialised_repo, "claude-code")
    settings = hook_file(initialised_repo, "claude-code")
    settings.write_text(settings.read_text().replace(str(MAJORDOMUS_HOOK), "/nonexistent/bin/majordomus-hook"))
    done = run_hook(initialised_repo, start_command(initialised_repo, "claude-code"),
                    session_bytes("claude-code", "start", "c-1"))
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    assert open_files(initialised_repo) == {}
    [fail] = [ln for ln in doctor_lines(initialised_repo) if ln.startswith("FAIL")]
    assert "/nonexistent/bin/majordomus-hook, which is gone" in fail and "capture install" in fail


def test_a_launcher_whose_interpreter_will_not_start_does_nothing_and_doctor_says_so(initialised_repo: Path,
                                                                                     tmp_path: Path) -> None:
    """A virtualenv deleted under a wired client: the per-person command names an interpreter that is gone; the
    person sees nothing."""
    install(initialised_repo, "claude-code")
    settings = hook_file(initialised_repo, "claude-code")
    found = parse(start_command(initialised_repo, "claude-code"))
    assert found is not None and found.interpreter is not None  # the launcher is started as `python -IS launcher`
    settings.write_text(settings.read_text().replace(found.interpreter, "/nonexistent/venv/bin/python"))
    done = run_hook(initialised_repo, start_command(initialised_repo, "claude-code"),
                    session_bytes("claude-code", "start", "c-1"))
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    assert open_files(initialised_repo) == {}
    [fail] = [ln for ln in doctor_lines(initialised_repo) if ln.startswith("FAIL")]
    assert f"the hooks start {MAJORDOMUS_HOOK} with /nonexistent/venv/bin/python, which is gone" in fail


@pytest.mark.parametrize("name", SHARED_HOOKS)
def test_a_launcher_on_path_whose_interpreter_will_not_start_does_nothing_and_doctor_says_so(
        initialised_repo: Path, tmp_path: Path, name: str) -> None:
    """The same for a shared file, which finds the launcher by name: its `#!` line names a python that is gone."""
    launcher = tmp_path / "venv" / "bin" / "majordomus-hook"
    launcher.parent.mkdir(parents=True)
    launcher.write_text("#!/nonexistent/venv/bin/python\n")
    launcher.chmod(0o755)
    install(initialised_repo, name)
    path = f"{launcher.parent}{os.pathsep}{SYSTEM_PATH}"  # only it: dash would try a working one further on
    done = run_hook(initialised_repo, start_command(initialised_repo, name), session_bytes(name, "start", "x-1"),
                    PATH=path)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    assert open_files(initialised_repo) == {}
    [fail] = [ln for ln in doctor_lines(initialised_repo, PATH=path) if ln.startswith("FAIL")]
    assert f"at {launcher}), which does not start" in fail and "reinstall majordomus" in fail


def test_doctor_says_which_launcher_each_wired_file_runs(initialised_repo: Path) -> None:
    install(initialised_repo, "claude-code")
    install(initialised_repo, "codex")
    lines = doctor_lines(initialised_repo)
    assert any(ln.startswith("OK ") and ".claude/settings.local.json" in ln and f"run {MAJORDOMUS_HOOK} (by path"
               in ln for ln in lines), lines
    assert any(ln.startswith("OK ") and ".codex/hooks.json" in ln and "run majordomus-hook (by name, found on this "
               f"PATH at {MAJORDOMUS_HOOK}" in ln for ln in lines), lines


def test_doctor_warns_of_hooks_an_earlier_install_wrote_and_install_replaces_them(initialised_repo: Path) -> None:
    install(initialised_repo, "codex")
    path = hook_file(initialised_repo, "codex")
    doc = json.loads(path.read_text())
    for groups in doc["hooks"].values():
        for group in groups:
            for handler in group["hooks"]:
                found = parse(handler["command"])
                assert found is not None
                handler["command"] = shlex.join(["majordomus", *found.words])  # an install before the guard
    path.write_text(json.dumps(doc))
    [warn] = [ln for ln in doctor_lines(initialised_repo) if ln.startswith("WARN")]
    assert "runs majordomus without the fail-open guard" in warn
    install(initialised_repo, "codex")
    assert not [ln for ln in doctor_lines(initialised_repo) if not ln.startswith("OK ")]
    commands = [h["command"] for gs in json.loads(path.read_text())["hooks"].values() for g in gs for h in g["hooks"]]
    # one handler a hook event the codex row wires (its session events and the prompt), each the guarded one
    assert len(commands) == len(doc["hooks"]) and all(c == shared_command(parse(c).words) for c in commands)  # type: ignore[union-attr]


def test_the_per_person_command_names_its_launcher_quoted(tmp_path: Path) -> None:
    """A path with a space or a quote in it stays one word for the shell, in the guard and in the call."""
    launcher = tmp_path / "a b" / "it's" / "majordomus-hook"
    launcher.parent.mkdir(parents=True)
    launcher.write_text(f"#!/bin/sh\necho \"$@\" > {tmp_path / 'said'}\n")
    launcher.chmod(0o755)
    command = local_command(launcher, ("capture", "prompt", "--provider", "x"))
    done = subprocess.run(["sh", "-c", command], capture_output=True, check=False)
    assert (done.returncode, done.stderr) == (0, b"")
    assert (tmp_path / "said").read_text() == "capture prompt --provider x\n"


@pytest.mark.parametrize("flags", ["", " -E"])
def test_the_per_person_command_starts_the_launchers_own_interpreter_isolated(tmp_path: Path, flags: str) -> None:
    """pip writes the launcher's `#!` line with or without `-E`: the command names that interpreter with -IS either
    way, and the launcher then runs without `site` (no .pth file of the environment is read)."""
    launcher = tmp_path / "bin" / "majordomus-hook"
    launcher.parent.mkdir()
    launcher.write_text(f"#!{sys.executable}{flags}\nimport sys\nprint(sys.flags.isolated, sys.flags.no_site, "
                        "'site' in sys.modules, sys.argv[1:])\n")
    launcher.chmod(0o755)
    command = local_command(launcher, ("capture", "prompt", "--provider", "x"))
    assert command.startswith(f"[ -x {sys.executable} ] && [ -f {launcher} ] || exit 0; {sys.executable} -IS ")
    done = subprocess.run(["sh", "-c", command.replace(" 2>/dev/null", "")], capture_output=True, text=True,
                          check=False)
    assert (done.returncode, done.stdout) == (0, "1 1 False ['capture', 'prompt', '--provider', 'x']\n"), done


@pytest.mark.parametrize("flags", ["", " -E"])
def test_the_shared_command_starts_the_launchers_own_interpreter_isolated(tmp_path: Path, flags: str) -> None:
    """pip and uv write the launcher's `#!` line without the wheel's `-IS`: the shared command, which finds the
    launcher on PATH, reads that line with the shell's builtins and starts the interpreter it names with -IS."""
    launcher = tmp_path / "bin" / "majordomus-hook"
    launcher.parent.mkdir()
    launcher.write_text(f"#!{sys.executable}{flags}\nimport sys\nprint(sys.flags.isolated, sys.flags.no_site, "
                        "'site' in sys.modules, sys.argv[1:])\n")
    launcher.chmod(0o755)
    command = shared_command(("capture", "prompt", "--provider", "x"))
    done = subprocess.run(["sh", "-c", command.replace(" 2>/dev/null", "")], capture_output=True, text=True,
                          env={**os.environ, "PATH": f"{launcher.parent}{os.pathsep}{SYSTEM_PATH}"}, check=False)
    assert (done.returncode, done.stdout) == (0, "1 1 False ['capture', 'prompt', '--provider', 'x']\n"), done


def test_the_shared_command_runs_a_launcher_whose_line_names_no_python_as_it_is(tmp_path: Path) -> None:
    """pip's `#!/bin/sh` form (an interpreter path too long or with a space for a `#!` line) names no python: the
    launcher runs by its own line, from a folder whose name has a space in it."""
    launcher = tmp_path / "a b" / "majordomus-hook"
    launcher.parent.mkdir()
    launcher.write_text(f"#!/bin/sh\necho \"$@\" > '{tmp_path / 'said'}'\n")
    launcher.chmod(0o755)
    command = shared_command(("capture", "prompt", "--provider", "x"))
    done = subprocess.run(["sh", "-c", command], capture_output=True, check=False,
                          env={**os.environ, "PATH": f"{launcher.parent}{os.pathsep}{SYSTEM_PATH}"})
    assert (done.returncode, done.stderr) == (0, b"")
    assert (tmp_path / "said").read_text() == "capture prompt --provider x\n"


def test_a_shared_command_of_ours_is_told_from_a_persons_edit_of_it() -> None:
    """Install replaces its own commands in place and leaves a person's: a word changed anywhere makes it theirs."""
    tail = ("capture", "prompt", "--provider", "gemini")
    command = shared_command(tail)
    found = parse(command)
    assert found is not None and (found.executable, found.words) == ("majordomus-hook", tail)
    assert parse(command.replace("--provider gemini 2>/dev/null;; *)", "--provider codex 2>/dev/null;; *)")) is None
    assert parse(command.replace("; esac; exit 0", "; esac; notify-send done; exit 0")) is None
