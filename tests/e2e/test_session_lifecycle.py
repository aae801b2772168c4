"""Episode boundaries drawn through the real `majordomus capture session`, with each client's payload shapes."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest

from clients.samples import SESSION_PROVIDERS, end_cases, session_bytes
from support import MAJORDOMUS, open_files, records, session_payload


def end(run_majordomus, repo: Path, provider: str, ps: str, reason: str | None):
    body: dict = {"session_id": ps, "hook_event_name": "SessionEnd"}
    if reason is not None:
        body["reason"] = reason
    return run_majordomus("capture", "session", "--provider", provider, "--event", "end", cwd=repo,
                          input=json.dumps(body).encode())


def start(run_majordomus, repo: Path, provider: str, ps: str, **extra):
    return run_majordomus("capture", "session", "--provider", provider, "--event", "start", cwd=repo,
                          input=session_payload(ps, **extra))


@pytest.mark.parametrize(("provider", "reason", "outcome"), end_cases(SESSION_PROVIDERS))
def test_a_deliberate_end_is_closed_and_any_other_is_interrupted(initialised_repo: Path, run_majordomus, provider,
                                                                  reason, outcome) -> None:
    """Every provider with a session row, every end its samples list, in the client's own payloads."""
    ps = f"{provider}-{reason}"
    opened = run_majordomus("capture", "session", "--provider", provider, "--event", "start", cwd=initialised_repo,
                            input=session_bytes(provider, "start", ps))
    assert opened.returncode == 0 and opened.stdout == b""
    assert b"opened at" in opened.stderr
    closed = run_majordomus("capture", "session", "--provider", provider, "--event", "end", cwd=initialised_repo,
                            input=session_bytes(provider, "end", ps, reason))
    assert closed.returncode == 0 and closed.stdout == b""
    line = closed.stderr.decode().strip()
    assert line.startswith(f"episode closed ({outcome}, reason {reason}) into .ai/repo/sessions/"), line
    meta = records(initialised_repo)[line.rsplit(" into ", 1)[1]]
    assert meta["outcome"] == outcome and meta["end_reason"] == reason and meta["provider"] == provider


@pytest.mark.parametrize("provider", SESSION_PROVIDERS)
def test_an_end_with_no_reason_is_interrupted_for_every_provider(initialised_repo: Path, run_majordomus,
                                                                 provider) -> None:
    ps = f"{provider}-no-reason"
    run_majordomus("capture", "session", "--provider", provider, "--event", "start", cwd=initialised_repo,
                   input=session_bytes(provider, "start", ps))
    done = run_majordomus("capture", "session", "--provider", provider, "--event", "end", cwd=initialised_repo,
                          input=session_bytes(provider, "end", ps))
    assert b"episode closed (interrupted, no reason given)" in done.stderr, done.stderr


def test_resume_and_compact_sources_keep_the_open_episode(initialised_repo: Path, run_majordomus) -> None:
    first = start(run_majordomus, initialised_repo, "claude-code", "s1", source="startup").stderr.decode()
    sid = first.split()[1]
    for source in ("resume", "compact"):
        again = start(run_majordomus, initialised_repo, "claude-code", "s1", source=source).stderr.decode()
        assert again.startswith(f"session {sid} already open here since ") and again.strip().endswith("; kept")
    assert len(open_files(initialised_repo)) == 1


def test_clear_opens_a_new_episode_under_the_new_provider_session(initialised_repo: Path, run_majordomus) -> None:
    start(run_majordomus, initialised_repo, "claude-code", "before-clear", source="startup")
    assert b"closed (closed, reason clear)" in end(run_majordomus, initialised_repo, "claude-code", "before-clear",
                                                   "clear").stderr
    after = start(run_majordomus, initialised_repo, "claude-code", "after-clear", source="clear")
    assert b"opened at" in after.stderr
    assert [f["provider_session"] for f in open_files(initialised_repo).values()] == ["after-clear"]


def test_precompact_is_counted_in_the_record(initialised_repo: Path, run_majordomus) -> None:
    start(run_majordomus, initialised_repo, "claude-code", "c1")
    for trigger in ("auto", "manual"):
        done = run_majordomus("capture", "session", "--provider", "claude-code", "--event", "compact",
                              cwd=initialised_repo, input=session_payload("c1", trigger=trigger))
        assert done.returncode == 0
    line = end(run_majordomus, initialised_repo, "claude-code", "c1", "logout").stderr.decode()
    assert records(initialised_repo)[line.strip().rsplit(" into ", 1)[1]]["compactions"] == 2
    ledger = (initialised_repo / ".ai/local/state/ledger.jsonl").read_text()
    events = [json.loads(x)["event"] for x in ledger.splitlines()]
    assert events == ["session.started", "session.compacted", "session.compacted", "session.closed"]


def test_a_second_end_closes_nothing(initialised_repo: Path, run_majordomus) -> None:
    start(run_majordomus, initialised_repo, "claude-code", "twice")
    end(run_majordomus, initialised_repo, "claude-code", "twice", "logout")
    again = end(run_majordomus, initialised_repo, "claude-code", "twice", "logout")
    assert again.returncode == 0
    assert again.stderr.decode().strip() == "no open episode here for provider session twice; nothing to close"
    assert len(records(initialised_repo)) == 1


def test_the_record_names_changes_commits_and_the_tree(initialised_repo: Path, run_majordomus) -> None:
    start(run_majordomus, initialised_repo, "claude-code", "work")
    (initialised_repo / "new.txt").write_text("x\n")
    subprocess.run(["git", "-C", str(initialised_repo), "add", "new.txt"], check=True)
    subprocess.run(["git", "-C", str(initialised_repo), "commit", "-qm", "work"], check=True)
    (initialised_repo / "README.md").write_text("changed\n")
    line = end(run_majordomus, initialised_repo, "claude-code", "work", "logout").stderr.decode().strip()
    meta = records(initialised_repo)[line.rsplit(" into ", 1)[1]]
    head = subprocess.run(["git", "-C", str(initialised_repo), "rev-parse", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    assert meta["head"] == head and meta["start_head"] != head
    assert meta["commits"] == [head[:7]]
    assert meta["changed_files"] == [" M README.md"] and meta["working_tree"] == "dirty"
    assert meta["branch"] == "main" and meta["schema"] == "session/v1" and meta["kind"] == "session"
    assert list(meta)[:7] == ["schema", "kind", "session_id", "provider", "started_at", "closed_at", "outcome"]


def test_a_remote_token_never_reaches_the_record(tmp_path: Path, run_majordomus) -> None:
    from support import make_initialised

    repo = make_initialised(tmp_path / "r", run_majordomus, origin="https://someone:ghp_notreallyatoken@example.invalid/a/b.git")
    start(run_majordomus, repo, "claude-code", "tok")
    end(run_majordomus, repo, "claude-code", "tok", "logout")
    text = next((repo / ".ai/repo/sessions").glob("2*.md")).read_text()
    assert "repository_id: \"https://example.invalid/a/b.git\"" in text
    assert "notreallyatoken" not in text


@pytest.mark.slow
def test_two_ends_racing_on_one_episode_write_one_record(initialised_repo: Path, run_majordomus) -> None:
    for trial in range(6):
        ps = f"race-{trial}"
        start(run_majordomus, initialised_repo, "claude-code", ps)
        body = json.dumps({"session_id": ps, "reason": "logout"}).encode()
        procs = [subprocess.Popen([str(MAJORDOMUS), "capture", "session", "--provider", "claude-code", "--event",
                                   "end"], cwd=initialised_repo, stdin=subprocess.PIPE, stderr=subprocess.PIPE)
                 for _ in range(3)]
        outs = [p.communicate(body, timeout=30)[1].decode() for p in procs]
        assert all(p.returncode == 0 for p in procs)
        assert sum("episode closed" in o for o in outs) == 1, outs
    assert len(records(initialised_repo)) == 6


@pytest.mark.slow
def test_kill_9_in_the_middle_of_a_close_leaves_no_partial_record_and_the_episode_closable(
        initialised_repo: Path, run_majordomus) -> None:
    rng = random.Random(7)
    for trial in range(25):
        ps = f"kill-{trial}"
        start(run_majordomus, initialised_repo, "claude-code", ps)
        proc = subprocess.Popen([str(MAJORDOMUS), "capture", "session", "--provider", "claude-code", "--event", "end"],
                                cwd=initialised_repo, stdin=subprocess.PIPE, stderr=subprocess.DEVNULL)
        assert proc.stdin is not None
        proc.stdin.write(json.dumps({"session_id": ps, "reason": "logout"}).encode())
        proc.stdin.close()
        time.sleep(rng.uniform(0.0, 0.12))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        for name, meta in records(initialised_repo).items():
            assert meta.get("outcome") in ("closed", "interrupted"), name  # every record whole
        again = end(run_majordomus, initialised_repo, "claude-code", ps, "logout").stderr.decode()
        assert ("episode closed" in again or "nothing to close" in again or "this close adds none" in again), again
        assert not any(f["provider_session"] == ps for f in open_files(initialised_repo).values())
    sids = [m["session_id"] for m in records(initialised_repo).values()]
    assert len(sids) == len(set(sids)) == 25
    leftovers = [p.name for p in (initialised_repo / ".ai/repo/sessions").iterdir() if p.name.startswith(".")]
    assert all(name.endswith(".tmp") for name in leftovers)
