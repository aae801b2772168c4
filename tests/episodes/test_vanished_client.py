"""A hook episode whose client process is gone ends at once, by evidence, not by time (SPEC 4.4).

The client here is a real process of its own, as Claude Code or Gemini CLI is: it runs its hooks through
`sh -c` (so the hook names it, past the shell, as `client: <pid>@<start ticks>`), then either lives on, is
stopped, exits without an end event (a window closed mid-answer: Gemini and Codex send none), or is killed.
Each reader of the episodes — a hook of another sitting, `episodes`, `show`, `capture status`, `doctor`,
`capture recover`, the shared server's board — must then close it `interrupted`, reason `vanished`, with the
evidence; an episode whose client runs is never touched.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from support import MAJORDOMUS, MAJORDOMUS_MCP, open_files, records

CLIENT = textwrap.dedent("""
    import json, subprocess, sys
    provider, session = sys.argv[1], sys.argv[2]
    def hook(*words, payload):
        subprocess.run(["sh", "-c", "majordomus " + " ".join(words)], input=json.dumps(payload).encode(),
                       capture_output=True, check=True)
    hook("capture", "session", "--provider", provider, "--event", "start",
         payload={"session_id": session, "source": "startup"})
    hook("capture", "prompt", "--provider", provider,
         payload={"session_id": session, "prompt": "fix the flaky parser test"})
    print("ready", flush=True)
    sys.stdin.readline()  # the sitting goes on until the test says; then the client is gone, with no end event
""")


class Client:
    """A client process with one open hook episode; `gone()` ends it without an end event."""

    def __init__(self, repo: Path, session: str, provider: str = "gemini") -> None:
        self.session = session
        self.process = subprocess.Popen([sys.executable, "-c", CLIENT, provider, session], cwd=repo,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line == b"ready\n", self.process.stderr.read() if self.process.stderr else line

    def gone(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(timeout=30)


@pytest.fixture
def clients(initialised_repo: Path) -> Iterator[list[Client]]:
    started: list[Client] = []
    yield started
    for c in started:
        if c.process.poll() is None:
            c.process.send_signal(signal.SIGCONT)
            c.kill()


def start(repo: Path, clients: list[Client], session: str, provider: str = "gemini") -> Client:
    c = Client(repo, session, provider)
    clients.append(c)
    return c


def majordomus(repo: Path, *args: str, payload: bytes = b"") -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(MAJORDOMUS), *args], cwd=repo, input=payload.decode(), capture_output=True,
                          text=True, timeout=60)


def only_record(repo: Path) -> dict[str, object]:
    found = list(records(repo).values())
    assert len(found) == 1, found
    return found[0]


def prompts(repo: Path) -> list[dict[str, object]]:
    folder = repo / ".ai" / "local" / "prompts"
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]


def test_the_episode_of_a_client_that_exited_without_an_end_is_interrupted_at_the_next_read(
        initialised_repo: Path, clients: list[Client]) -> None:
    repo = initialised_repo
    c = start(repo, clients, "g-left")
    [opened] = open_files(repo).values()
    c.gone()
    listed = json.loads(majordomus(repo, "--json", "episodes").stdout)["episodes"]
    assert [(e["id"], e["state"], e["end_reason"]) for e in listed] == [(opened["session_id"], "interrupted",
                                                                          "vanished")]
    record = only_record(repo)
    assert (record["outcome"], record["end_reason"], record["last_turn"]) == ("interrupted", "vanished", "running")
    assert record["end_evidence"] == (f"the client process {c.process.pid} (started at tick "
                                      f"{str(opened['client']).split('@')[1]}) is gone")
    assert open_files(repo) == {}


def test_the_prompts_of_a_vanished_client_stay_linked_to_its_episode(initialised_repo: Path,
                                                                     clients: list[Client]) -> None:
    repo = initialised_repo
    c = start(repo, clients, "g-prompts")
    sid = next(iter(open_files(repo).values()))["session_id"]
    c.gone()
    assert majordomus(repo, "episodes").returncode == 0
    assert [(p["episode"], p["episode_link"]) for p in prompts(repo)] == [(sid, "open")]
    assert "1 linked" in majordomus(repo, "doctor").stdout


def test_a_killed_client_is_vanished_too(initialised_repo: Path, clients: list[Client]) -> None:
    repo = initialised_repo
    start(repo, clients, "g-killed").kill()
    assert majordomus(repo, "episodes").returncode == 0
    assert only_record(repo)["end_reason"] == "vanished"


def test_an_episode_whose_client_runs_is_never_touched(initialised_repo: Path, clients: list[Client]) -> None:
    repo = initialised_repo
    start(repo, clients, "g-alive")
    for argv in (["episodes"], ["doctor"], ["capture", "status"], ["capture", "recover"]):
        assert majordomus(repo, *argv).returncode in (0, 10), argv
    assert records(repo) == {}
    assert [f["provider_session"] for f in open_files(repo).values()] == ["g-alive"]


def test_a_stopped_client_is_not_a_vanished_one(initialised_repo: Path, clients: list[Client]) -> None:
    repo = initialised_repo
    c = start(repo, clients, "g-stopped")
    c.process.send_signal(signal.SIGSTOP)
    try:
        deadline = time.monotonic() + 10
        while Path(f"/proc/{c.process.pid}/stat").read_text().split(") ")[1][0] != "T":
            assert time.monotonic() < deadline, "the client did not stop"
            time.sleep(0.01)
        assert majordomus(repo, "episodes").returncode == 0
        assert records(repo) == {}
    finally:
        c.process.send_signal(signal.SIGCONT)
    c.gone()
    assert majordomus(repo, "episodes").returncode == 0
    assert only_record(repo)["end_reason"] == "vanished"


def test_a_pid_reused_by_another_process_is_a_vanished_client(initialised_repo: Path,
                                                              clients: list[Client]) -> None:
    """The open file names a live pid with other start ticks: the process it named is gone."""
    repo = initialised_repo
    start(repo, clients, "g-reused")
    [path] = (repo / ".ai" / "local" / "state" / "sessions-open").glob("*.yaml")
    pid, ticks = next(iter(open_files(repo).values()))["client"].split("@")
    other = os.getpid()  # this test's own process: alive, and not the client
    path.write_text(path.read_text().replace(f'client: "{pid}@{ticks}"', f'client: "{other}@{int(ticks) + 1}"'))
    assert majordomus(repo, "episodes").returncode == 0
    evidence = str(only_record(repo)["end_evidence"])
    assert evidence.startswith(f"the client process {other} (started at tick {int(ticks) + 1}) is gone; pid {other} "
                               "now names another process"), evidence


def test_a_client_named_in_another_pid_namespace_is_left_to_its_own(initialised_repo: Path,
                                                                     clients: list[Client]) -> None:
    """A pid read in another container (or on another machine sharing the repository) names nothing here."""
    repo = initialised_repo
    c = start(repo, clients, "g-elsewhere")
    [path] = (repo / ".ai" / "local" / "state" / "sessions-open").glob("*.yaml")
    text = path.read_text()
    namespace = next(iter(open_files(repo).values()))["client_namespace"]
    path.write_text(text.replace(json.dumps(namespace), json.dumps("another-boot/pid:[1]")))
    c.gone()
    assert majordomus(repo, "episodes").returncode == 0
    assert records(repo) == {}


READERS = {
    "episodes": ["episodes"],
    "show": ["show", "--json", "s-"],
    "status": ["capture", "status"],
    "doctor": ["doctor"],
    "recover": ["capture", "recover"],
}


@pytest.mark.parametrize("reader", sorted(READERS))
def test_each_reader_of_the_episodes_ends_a_vanished_clients_episode(initialised_repo: Path, clients: list[Client],
                                                                     reader: str) -> None:
    repo = initialised_repo
    c = start(repo, clients, f"g-{reader}")
    c.gone()
    done = majordomus(repo, *READERS[reader])
    assert done.returncode in (0, 2, 10), done.stderr  # `show s-` may be ambiguous or not: it read them all
    assert only_record(repo)["end_reason"] == "vanished"


def test_the_hook_of_another_sitting_ends_a_vanished_clients_episode(initialised_repo: Path,
                                                                     clients: list[Client]) -> None:
    repo = initialised_repo
    start(repo, clients, "g-first").gone()
    done = majordomus(repo, "capture", "prompt", "--provider", "claude-code",
                      payload=json.dumps({"session_id": "c-other", "prompt": "hello"}).encode())
    assert done.returncode == 0, done.stderr
    assert only_record(repo)["end_reason"] == "vanished"


def test_a_start_of_the_same_session_by_a_new_process_opens_a_new_episode(initialised_repo: Path,
                                                                          clients: list[Client]) -> None:
    """A sitting resumed after its client vanished is a new sitting: the old one ends interrupted, once."""
    repo = initialised_repo
    start(repo, clients, "g-again").gone()
    first = next(iter(open_files(repo).values()))["session_id"]
    start(repo, clients, "g-again")
    [now_open] = open_files(repo).values()
    assert now_open["session_id"] != first
    assert [(r["session_id"], r["end_reason"]) for r in records(repo).values()] == [(first, "vanished")]


def test_a_prompt_of_the_vanished_clients_own_session_keeps_its_episode(initialised_repo: Path,
                                                                        clients: list[Client]) -> None:
    """A prompt of that very session comes from a live process: nothing says the sitting ended."""
    repo = initialised_repo
    start(repo, clients, "g-own").gone()
    sid = next(iter(open_files(repo).values()))["session_id"]
    done = majordomus(repo, "capture", "prompt", "--provider", "gemini",
                      payload=json.dumps({"session_id": "g-own", "prompt": "still here"}).encode())
    assert done.returncode == 0, done.stderr
    assert records(repo) == {}
    assert [p["episode"] for p in prompts(repo)] == [sid, sid]


def test_readers_at_once_write_one_record(initialised_repo: Path, clients: list[Client]) -> None:
    repo = initialised_repo
    start(repo, clients, "g-race").gone()
    readers = [subprocess.Popen([str(MAJORDOMUS), "episodes"], cwd=repo, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE) for _ in range(6)]
    assert [r.wait(timeout=60) for r in readers] == [0] * 6
    only_record(repo)
    closes = [json.loads(line) for line in (repo / ".ai/local/state/ledger.jsonl").read_text().splitlines()
              if '"session.closed"' in line]
    assert len(closes) == 1, closes


def test_the_shared_servers_board_ends_a_vanished_clients_episode(initialised_repo: Path,
                                                                  clients: list[Client]) -> None:
    repo = initialised_repo
    start(repo, clients, "g-board").gone()
    server = subprocess.Popen([str(MAJORDOMUS_MCP), "--http-port", "0"], cwd=repo, stdin=subprocess.PIPE,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while not records(repo):
            assert time.monotonic() < deadline, "the server did not end the episode"
            time.sleep(0.05)
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(timeout=30)
    assert only_record(repo)["end_reason"] == "vanished"
