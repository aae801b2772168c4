"""Helpers shared by tests (importable as a plain module: tests/ is on sys.path through rootdir conftest)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

BIN_DIR = Path(sys.executable).parent
MAJORDOMUS = BIN_DIR / "majordomus"
MAJORDOMUS_MCP = BIN_DIR / "majordomus-mcp"
MAJORDOMUS_HOOK = BIN_DIR / "majordomus-hook"  # the lean, fail-open launcher the wired hooks run
SRC_DIR = Path(__file__).resolve().parents[1] / "src"


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


def hook(repo: Path, event: str, payload: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    """One `capture session --provider claude-code --event <event>` through the real executable."""
    return subprocess.run([str(MAJORDOMUS), "capture", "session", "--provider", "claude-code", "--event", event],
                          cwd=repo, input=json.dumps(payload).encode(), capture_output=True, timeout=60)


def kill_end_after(repo: Path, ps: str, seconds: float) -> None:
    """Start an `end` of `ps` (reason other) and SIGKILL it after `seconds`: a close cut wherever it had got to."""
    proc = subprocess.Popen([str(MAJORDOMUS), "capture", "session", "--provider", "claude-code", "--event", "end"],
                            cwd=repo, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert proc.stdin is not None
    proc.stdin.write(json.dumps({"session_id": ps, "reason": "other"}).encode())
    proc.stdin.close()
    time.sleep(seconds)
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def capture_prompt(repo: Path, text: str, session: str = "ps") -> None:
    """One `capture prompt` of Claude Code's shape, through the executable; it must succeed."""
    done = subprocess.run([str(MAJORDOMUS), "capture", "prompt", "--provider", "claude-code"], cwd=repo,
                          input=json.dumps({"session_id": session, "prompt": text}).encode(), capture_output=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr


def unique_prefix(sid: str, others: list[str]) -> str:
    """`sid` less its last two characters, or less one, or whole: the shortest of these no other id starts with
    (episode ids of one second share all but 4 random hex digits, so a fixed cut is ambiguous 1 time in 256)."""
    return next(sid[:n] for n in range(len(sid) - 2, len(sid) + 1) if not any(o.startswith(sid[:n]) for o in others))


def fill_archive(repo: Path, count: int) -> None:
    """`count` records over 200 days back from now (prune takes the oldest tenth), every 10th without its
    link (reconcile rewrites it), every 10th without renderings (render writes them)."""
    from datetime import datetime, timedelta, timezone

    from majordomus.archive import record as rec
    from majordomus.archive.render import render_md, render_yaml
    from majordomus.identity import rfc3339
    from majordomus.layout import Layout

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


def broken_install(tmp: Path, files: dict[str, str]) -> Path:
    """An install that is there but broken: a virtualenv of its own holding the launcher, and in its site-packages
    `files` (name -> text) instead of a working majordomus. Its bin folder."""
    venv = tmp / "broken-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    [site] = (venv / "lib").glob("python3.*/site-packages")
    shutil.copy(SRC_DIR / "majordomus_hook.py", site)  # the launcher's work, beside the broken package as installed
    for rel, text in files.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(text)
    launcher = venv / "bin" / MAJORDOMUS_HOOK.name
    launcher.write_text(f"#!{venv / 'bin' / 'python'}\n" + MAJORDOMUS_HOOK.read_text().split("\n", 1)[1])
    launcher.chmod(0o755)
    return venv / "bin"


GIT_WRAPPER = """#!/bin/sh
echo "$$ ${{GIT_OPTIONAL_LOCKS:-unset}} $*" >> {log}
if [ -e {marker} ]; then
  case " $* " in
    {slow}) sleep 5 & child=$!; trap 'kill $child; exit 143' TERM; wait $child;;
  esac
fi
exec {git} "$@"
"""


def wrapped_git(where: Path, slow: tuple[str, ...] = ("status", "rev-list")) -> tuple[Path, Path, Path]:
    """A directory holding a `git` that logs every call (`pid GIT_OPTIONAL_LOCKS words`) and, while `marker`
    exists, sleeps 5 s before the `slow` subcommands (a SIGTERM ends it and its sleep); (bin dir, log, marker)."""
    bindir, log, marker = where / "git-bin", where / "git-calls.log", where / "slow-now"
    bindir.mkdir()
    real = shutil.which("git")
    assert real is not None
    wrapper = bindir / "git"
    wrapper.write_text(GIT_WRAPPER.format(log=log, marker=marker, git=real,
                                          slow="|".join(f'*" {word} "*' for word in slow)))
    wrapper.chmod(0o755)
    return bindir, log, marker


def git_calls(log: Path) -> list[tuple[int, str, str]]:
    """The wrapper's log: (pid, GIT_OPTIONAL_LOCKS, the words) per call."""
    lines = log.read_text().splitlines() if log.exists() else []
    return [(int(pid), locks, words) for pid, locks, words in (line.split(" ", 2) for line in lines if line)]
