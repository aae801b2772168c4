"""Bad input to `capture session` exits 0, loses nothing it had, writes nothing outside .ai/, and says why."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from clients.samples import CONNECTION, WITHOUT_EPISODES
from support import MAJORDOMUS, open_files, session_payload

MALFORMED = {
    "not JSON": b"{this is not json",
    "an array": b'[{"session_id": "x"}]',
    "a string": b'"session_id"',
    "invalid UTF-8": b'{"session_id": "\xff\xfe"}',
    "wrong types": b'{"session_id": ["a", "b"], "reason": {"x": 1}}',
    "no session id": b'{"hook_event_name": "SessionStart", "source": "startup"}',
    "a blank session id": b'{"session_id": "   "}',
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_a_malformed_payload_exits_0_and_is_logged_by_shape_only(initialised_repo: Path, run_majordomus,
                                                                  name: str) -> None:
    done = run_majordomus("capture", "session", "--provider", "claude-code", "--event", "start",
                          cwd=initialised_repo, input=MALFORMED[name])
    assert done.returncode == 0 and done.stdout == b""
    assert b"nothing recorded" in done.stderr
    assert open_files(initialised_repo) == {}
    log = (initialised_repo / ".ai/local/session-contexts/.session-context.log").read_text()
    assert "nothing recorded" in log
    assert "\xff" not in log and "startup" not in log  # shapes and key names, never values


def test_a_ten_megabyte_payload_still_draws_the_boundary(initialised_repo: Path, run_majordomus) -> None:
    body = session_payload("big", source="startup", transcript=("x" * (10 * 1024 * 1024)))
    done = run_majordomus("capture", "session", "--provider", "claude-code", "--event", "start",
                          cwd=initialised_repo, input=body)
    assert done.returncode == 0 and b"opened at" in done.stderr
    assert os.path.getsize(next((initialised_repo / ".ai/local/state/sessions-open").iterdir())) < 4096


@pytest.mark.parametrize("hostile", ["../../x", "/etc/passwd", "..", ".", "a/b\\c", "x\ny", "\u00e9t\u00e9", "%2E%2E",
                                     "k" * 10_000, ""])
def test_a_hostile_session_id_is_keyed_inside_the_store(initialised_repo: Path, run_majordomus, hostile: str) -> None:
    before = {p for p in initialised_repo.parent.rglob("*")}
    done = run_majordomus("capture", "session", "--provider", CONNECTION, "--event", "start", cwd=initialised_repo,
                          input=json.dumps({"session_id": hostile, "source": "attach"}).encode())
    assert done.returncode == 0
    created = {p for p in initialised_repo.parent.rglob("*")} - before
    assert all(str(p).startswith(str(initialised_repo / ".ai")) for p in created), created
    if hostile.strip():
        (name,) = open_files(initialised_repo)
        assert "/" not in name and ".." not in name and len(name) < 250
        assert next(iter(open_files(initialised_repo).values()))["provider_session"] == hostile.strip()
        closed = run_majordomus("capture", "session", "--provider", CONNECTION, "--event", "end", cwd=initialised_repo,
                                input=json.dumps({"session_id": hostile, "reason": "detach"}).encode())
        assert b"episode closed (closed, reason detach)" in closed.stderr


def test_under_umask_000_state_stays_private(initialised_repo: Path) -> None:
    def run(event: str, body: bytes) -> None:
        subprocess.run([str(MAJORDOMUS), "capture", "session", "--provider", "claude-code", "--event", event],
                       cwd=initialised_repo, input=body, check=True, capture_output=True,
                       preexec_fn=lambda: os.umask(0))

    run("start", session_payload("u0"))
    run("compact", session_payload("u0"))
    local = initialised_repo / ".ai/local"
    for path in local.rglob("*"):
        mode = stat.S_IMODE(path.stat().st_mode)
        if path.is_dir():
            assert mode == 0o700, path
        else:
            assert mode == 0o600, (path, oct(mode))
    run("end", session_payload("u0", reason="logout"))
    record = next((initialised_repo / ".ai/repo/sessions").glob("2*.md"))
    assert stat.S_IMODE(record.stat().st_mode) == 0o644  # tracked and shared, never world-writable


def test_an_unknown_provider_is_exit_12(initialised_repo: Path, run_majordomus) -> None:
    done = run_majordomus("capture", "session", "--provider", "no-such-client", "--event", "start",
                          cwd=initialised_repo, input=b"{}")
    assert done.returncode == 12
    assert done.stderr.startswith(b"majordomus: unknown provider 'no-such-client'")


@pytest.mark.parametrize("provider", WITHOUT_EPISODES)
def test_a_provider_without_episodes_is_exit_12(initialised_repo: Path, run_majordomus, provider: str) -> None:
    done = run_majordomus("capture", "session", "--provider", provider, "--event", "start", cwd=initialised_repo,
                          input=b"{}")
    assert done.returncode == 12 and b"capture status" in done.stderr


def test_outside_a_repository_is_exit_12(tmp_path: Path, run_majordomus) -> None:
    done = run_majordomus("capture", "session", "--provider", "claude-code", "--event", "start", cwd=tmp_path,
                          input=session_payload("x"))
    assert done.returncode == 12 and b"not inside a git repository" in done.stderr


def test_an_uninitialised_repository_is_exit_12_and_names_init(git_repo: Path, run_majordomus) -> None:
    done = run_majordomus("capture", "session", "--provider", "claude-code", "--event", "start", cwd=git_repo,
                          input=session_payload("x"))
    assert done.returncode == 12 and b"majordomus init" in done.stderr


def test_an_unknown_event_is_a_usage_error(initialised_repo: Path, run_majordomus) -> None:
    done = run_majordomus("capture", "session", "--provider", "claude-code", "--event", "pause", cwd=initialised_repo)
    assert done.returncode == 2 and b"try 'majordomus capture session --help'" in done.stderr


def test_dry_run_says_what_it_would_do_and_writes_nothing(initialised_repo: Path, run_majordomus) -> None:
    done = run_majordomus("capture", "session", "--provider", CONNECTION, "--event", "end", "--dry-run",
                          cwd=initialised_repo,
                          input=json.dumps({"session_id": "selftest-1", "reason": "detach"}).encode())
    assert done.stderr.decode().strip() == (f"capture session: would end the episode for {CONNECTION} "
                                            "(provider session selftest-1), reason detach")
    assert not (initialised_repo / ".ai/local/state/ledger.jsonl").exists()
