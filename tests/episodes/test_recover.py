"""`capture recover` through the real executable: stale hook episodes close `interrupted` (reason `stale`),
connection episodes no live server holds are stamped `detached_at` and close `expired` after the grace."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from clients.samples import CONNECTION
from support import open_files, records, session_payload

LONG_AGO = (datetime.now(timezone.utc) - timedelta(days=3)).strftime("%Y-%m-%dT%H:%M:%SZ")


def start(run_majordomus, repo: Path, provider: str, ps: str, **extra: str) -> None:
    done = run_majordomus("capture", "session", "--provider", provider, "--event", "start", cwd=repo,
                          input=session_payload(ps, **extra))
    assert done.returncode == 0 and b"opened at" in done.stderr, done.stderr


def open_path(repo: Path, ps: str) -> Path:
    (path,) = [p for p in (repo / ".ai/local/state/sessions-open").glob("*.yaml")
               if f'provider_session: "{ps}"' in p.read_text()]
    return path


def set_field(repo: Path, ps: str, key: str, value: object) -> None:
    path = open_path(repo, ps)
    text, count = re.subn(rf"^{key}: .*$", f"{key}: {json.dumps(value)}", path.read_text(), flags=re.MULTILINE)
    assert count == 1
    path.write_text(text)


def layer_snapshot(repo: Path) -> dict[str, bytes]:
    return {str(p.relative_to(repo)): p.read_bytes() for p in sorted((repo / ".ai").rglob("*"))
            if p.is_file() and "locks" not in p.parts and p.name != "policy.cache.json"}


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_stale_hook_episode_is_closed_interrupted_with_reason_stale(initialised_repo: Path, run_majordomus) -> None:
    start(run_majordomus, initialised_repo, "claude-code", "cc-stale", source="startup")
    set_field(initialised_repo, "cc-stale", "last_activity_at", LONG_AGO)
    before = layer_snapshot(initialised_repo)
    dry = run_majordomus("capture", "recover", "--dry-run", cwd=initialised_repo)
    assert dry.returncode == 0, dry.stderr
    assert b"would close" in dry.stdout and b"stale" in dry.stdout
    assert layer_snapshot(initialised_repo) == before
    done = run_majordomus("capture", "recover", cwd=initialised_repo)
    assert done.returncode == 0, done.stderr
    assert b"episode closed (interrupted, reason stale)" in done.stdout
    (record,) = records(initialised_repo).values()
    assert record["outcome"] == "interrupted" and record["end_reason"] == "stale"
    assert open_files(initialised_repo) == {}
    again = run_majordomus("capture", "recover", cwd=initialised_repo)
    assert again.stdout.strip() == b"nothing to recover"


def test_a_recent_hook_episode_is_left_open(initialised_repo: Path, run_majordomus) -> None:
    start(run_majordomus, initialised_repo, "gemini", "gem-fresh")
    done = run_majordomus("capture", "recover", cwd=initialised_repo)
    assert done.stdout.strip() == b"nothing to recover"
    assert len(open_files(initialised_repo)) == 1


def test_a_new_provider_session_start_recovers_a_stale_episode(initialised_repo: Path, run_majordomus) -> None:
    start(run_majordomus, initialised_repo, "claude-code", "cc-old")
    set_field(initialised_repo, "cc-old", "last_activity_at", LONG_AGO)
    start(run_majordomus, initialised_repo, "codex", "codex-new")
    (record,) = records(initialised_repo).values()
    assert record["outcome"] == "interrupted" and record["end_reason"] == "stale"
    assert [f["provider_session"] for f in open_files(initialised_repo).values()] == ["codex-new"]


@pytest.mark.slow
def test_a_connection_episode_of_a_dead_server_is_detached_then_expired_after_the_grace(initialised_repo: Path,
                                                                                         run_majordomus) -> None:
    """1. a connection episode opens, held by a server pid that is dead; the grace is 1 s;
    2. recover --dry-run writes nothing; recover stamps detached_at (the grace runs from there);
    3. once the grace has passed, recover --dry-run still writes nothing, and recover closes it.
    The record says interrupted, reason expired."""
    policy = initialised_repo / ".ai/repo/policy.yaml"
    policy.write_text(re.sub(r"reattach_grace_seconds: \d+", "reattach_grace_seconds: 1", policy.read_text()))
    start(run_majordomus, initialised_repo, CONNECTION, "thread-1", source="attach")
    set_field(initialised_repo, "thread-1", "held_by", dead_pid())

    before = layer_snapshot(initialised_repo)
    dry = run_majordomus("capture", "recover", "--dry-run", cwd=initialised_repo)
    assert b"no live server" in dry.stdout, dry.stdout
    assert layer_snapshot(initialised_repo) == before
    stamped = run_majordomus("capture", "recover", cwd=initialised_repo)
    assert b"no live server" in stamped.stdout
    (fields,) = open_files(initialised_repo).values()
    assert fields["detached_at"] and fields["held_by"] is None

    deadline = time.monotonic() + 15
    while True:  # the grace is measured by recover itself; wait for it with a deadline
        before = layer_snapshot(initialised_repo)
        dry = run_majordomus("capture", "recover", "--dry-run", cwd=initialised_repo)
        assert layer_snapshot(initialised_repo) == before
        if b"would close" in dry.stdout:
            break
        assert time.monotonic() < deadline, dry.stdout
        time.sleep(0.2)
    assert b"expired" in dry.stdout and records(initialised_repo) == {}
    done = run_majordomus("capture", "recover", cwd=initialised_repo)
    assert b"episode closed (interrupted, reason expired)" in done.stdout, done.stdout
    (record,) = records(initialised_repo).values()
    assert record["outcome"] == "interrupted" and record["end_reason"] == "expired"
    assert open_files(initialised_repo) == {}


def test_a_connection_episode_held_by_a_live_majordomus_is_left_alone(initialised_repo: Path,
                                                                      run_majordomus) -> None:
    start(run_majordomus, initialised_repo, CONNECTION, "thread-live", source="attach")
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "majordomus-holder"])
    try:
        set_field(initialised_repo, "thread-live", "held_by", holder.pid)
        done = run_majordomus("capture", "recover", cwd=initialised_repo)
        assert done.stdout.strip() == b"nothing to recover"
    finally:
        holder.kill()
        holder.wait()


def test_recover_outside_a_layer_exits_12_and_names_init(git_repo: Path, run_majordomus) -> None:
    done = run_majordomus("capture", "recover", cwd=git_repo)
    assert done.returncode == 12
    assert b"majordomus init" in done.stderr
