"""A start SIGKILLed after its open file and before its ledger line (found by the soak at load 7).

A lease holder killed in the middle of an attach left an open episode with no `session.started` line, and the
client's replayed attach kept it as it was: the record then said the sitting had no episode. Each test holds the
ledger's lock (as a rotation does) so that the start is caught exactly there, kills it with SIGKILL, and starts
the same session again: the episode is kept, once, and its line is appended, once.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import time
from pathlib import Path

import yaml

from mcp_support import McpProcess, call, initialize, wait_for
from support import MAJORDOMUS, hook

OPEN = ".ai/local/state/sessions-open"


def started_lines(repo: Path, sid: str) -> list[dict[str, object]]:
    ledger = repo / ".ai/local/state/ledger.jsonl"
    rows = [json.loads(line) for line in ledger.read_text().splitlines()] if ledger.exists() else []
    return [r for r in rows if r.get("event") == "session.started" and r.get("session") == sid]


class LedgerHeld:
    """The ledger's lock taken exclusively, as `history --rotate` takes it: every append waits."""

    def __init__(self, repo: Path) -> None:
        self.path = repo / ".ai/local/state/locks/ledger.lock"

    def __enter__(self) -> LedgerHeld:
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)


def kill_mid_attach(repo: Path, external_id: str) -> str:
    """A stdio server SIGKILLed inside an attach, after its open file and before its ledger line; the episode id."""
    with LedgerHeld(repo):
        first = McpProcess(repo, "--standalone")
        first.request(initialize("killed"))
        first.send(call(2, "majordomus_session_attach", {"external_id": external_id}))
        wait_for((repo / OPEN / f"{external_id}.yaml").exists, 15, "the attach's open file")
        time.sleep(0.2)
        first.kill()  # SIGKILL: the attach never answered
    sid: str = yaml.safe_load((repo / OPEN / f"{external_id}.yaml").read_text())["session_id"]
    assert started_lines(repo, sid) == []
    return sid


def test_a_hook_start_killed_before_its_ledger_line_gets_it_from_the_next_start(initialised_repo: Path) -> None:
    open_file = initialised_repo / OPEN / "cut-1.yaml"
    with LedgerHeld(initialised_repo):
        proc = subprocess.Popen([str(MAJORDOMUS), "capture", "session", "--provider", "claude-code", "--event",
                                 "start"], cwd=initialised_repo, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        assert proc.stdin is not None
        proc.stdin.write(json.dumps({"session_id": "cut-1", "source": "startup"}).encode())
        proc.stdin.close()
        wait_for(open_file.exists, 15, "the open file of the start")
        time.sleep(0.2)  # the start is now waiting for the ledger
        proc.kill()
        proc.wait(timeout=10)
    sid = yaml.safe_load(open_file.read_text())["session_id"]
    assert started_lines(initialised_repo, sid) == []  # what the kill left

    again = hook(initialised_repo, "start", {"session_id": "cut-1", "source": "resume"})
    assert again.returncode == 0 and b"kept" in again.stderr, again.stderr
    (line,) = started_lines(initialised_repo, sid)
    opened = yaml.safe_load(open_file.read_text())
    assert (line["ts"], line["provider"], line["provider_session"]) == (opened["started_at"], "claude-code", "cut-1")
    assert line["head"] == opened["start_head"] and line["branch"] == opened["branch"]
    assert b"kept" in hook(initialised_repo, "start", {"session_id": "cut-1", "source": "resume"}).stderr
    assert len(started_lines(initialised_repo, sid)) == 1  # a later keep adds none


def test_a_server_killed_mid_attach_leaves_an_episode_the_next_attach_completes(initialised_repo: Path) -> None:
    sid = kill_mid_attach(initialised_repo, "sitting-7")

    with McpProcess(initialised_repo, "--standalone") as second:
        second.request(initialize("again"))
        answer = second.request(call(2, "majordomus_session_attach", {"external_id": "sitting-7"}))
        assert answer["result"]["isError"] is False, answer
        assert "kept" in json.dumps(answer["result"]["structuredContent"])
    (line,) = started_lines(initialised_repo, sid)
    assert line["provider"] == "generic" and line["provider_session"] == "sitting-7"


def test_an_episode_whose_server_died_in_its_start_gets_its_line_from_the_next_server(initialised_repo: Path) -> None:
    """The soak at load 3.5: the killed attach's client never came back, so no start kept the episode; the next
    server's recovery, which finds it orphaned, appends the line (before it ever closes the episode)."""
    sid = kill_mid_attach(initialised_repo, "gone-9")

    with McpProcess(initialised_repo, "--standalone") as second:
        second.request(initialize("someone else"))  # never names gone-9
        wait_for(lambda: started_lines(initialised_repo, sid), 15, "the recovered episode's session.started line")
        # the line comes first, then the episode is marked detached (its grace runs from this recovery)
        wait_for(lambda: yaml.safe_load((initialised_repo / OPEN / "gone-9.yaml").read_text())["held_by"] is None,
                 15, "the orphaned episode marked detached")
    (line,) = started_lines(initialised_repo, sid)
    assert line["provider_session"] == "gone-9"
