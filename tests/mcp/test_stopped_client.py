"""A stopped MCP client is not a vanished one, for as long as the reattach grace runs.

A client stopped with SIGSTOP (Ctrl-Z stops the whole foreground group: the client and the `majordomus-mcp` it
spawned) says nothing to the shared server. Once the server's idle bound passes it ends the silent connection
and detaches the episode; the episode is not closed. Continued within the grace, the bridge finds its session
gone, initialises again and replays its attach: the same episode, resumed, still one. Continued past the grace,
the server has closed it `interrupted` (reason `expired`), and the replayed attach opens nothing: the client's
next call sees no episode of its own until it attaches again, which opens a second one.

The idle bound is cut to under a second here (MAJORDOMUS_HTTP_IDLE_SECONDS) so the detach happens in the test's
time; with the default (90 s) a stop shorter than that changes nothing at all.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mcp_support import OPEN, McpProcess, call, initialize, open_file, set_policy, structured, wait_for
from support import records

INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
FAST = {"MAJORDOMUS_HTTP_IDLE_SECONDS": "0.6", "MAJORDOMUS_REAP_INTERVAL_SECONDS": "0.1"}


def process_state(pid: int) -> str:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2]


@contextmanager
def sitting(repo: Path, external_id: str) -> Iterator[tuple[McpProcess, McpProcess]]:
    """A shared server and a bridged client that attached `external_id`."""
    with McpProcess(repo, "--http-port", "0", env=FAST) as holder:
        holder.url()
        holder.request(initialize("holder"))
        client = McpProcess(repo, env=FAST)
        try:
            client.request(initialize("stopped"))
            client.send(INITIALIZED)
            assert structured(client.request(call(2, "majordomus_session_attach", {"external_id": external_id})))
            client.wait_stderr("bridging this stdio session to it")
            yield holder, client
        finally:
            client.kill()


def stop(client: McpProcess) -> None:
    client.proc.send_signal(signal.SIGSTOP)
    wait_for(lambda: process_state(client.proc.pid) == "T", 10, "the client to stop")


def detached(repo: Path, external_id: str) -> bool:
    state = open_file(repo, external_id)
    return state is not None and bool(state.get("detached_at"))


def closed_records(repo: Path) -> list[tuple[str, str]]:
    return sorted((str(r["outcome"]), str(r["end_reason"])) for r in records(repo).values())


def mine(client: McpProcess, request_id: int) -> dict[str, Any] | None:
    """The client's own episode as `majordomus_episodes` shows it (no `mine` while it holds none)."""
    listing = structured(client.request(call(request_id, "majordomus_episodes"), timeout=30))
    found: dict[str, Any] | None = listing.get("mine")
    return found


def test_a_client_stopped_within_the_grace_keeps_its_one_episode(initialised_repo: Path) -> None:
    repo = initialised_repo
    set_policy(repo, episodes__reattach_grace_seconds=120)
    with sitting(repo, "ep-stopped") as (_, client):
        before = open_file(repo, "ep-stopped")
        assert before is not None
        stop(client)
        try:
            # the server heard nothing past its idle bound: the connection ended, the episode detached, not closed
            wait_for(lambda: detached(repo, "ep-stopped"), 15, "the silent connection's episode to detach")
            assert closed_records(repo) == []
        finally:
            client.proc.send_signal(signal.SIGCONT)
        # the bridge's next keepalive finds its session gone, initialises again and replays the attach
        wait_for(lambda: not detached(repo, "ep-stopped"), 15, "the replayed attach to resume the episode")
        listed = mine(client, 3)
        assert listed is not None and listed["external_id"] == "ep-stopped" and listed["state"] == "open"
        after = open_file(repo, "ep-stopped")
        assert after is not None and after["session_id"] == before["session_id"]
        done = structured(client.request(call(4, "majordomus_session_detach", {}), timeout=30))
        assert done["episode"]["external_id"] == "ep-stopped"
    assert closed_records(repo) == [("closed", "detach")]
    assert list((repo / OPEN).glob("*.yaml")) == []


def test_a_client_stopped_past_the_grace_finds_its_episode_ended_interrupted(initialised_repo: Path) -> None:
    repo = initialised_repo
    set_policy(repo, episodes__reattach_grace_seconds=1)
    with sitting(repo, "ep-frozen") as (_, client):
        stop(client)
        try:
            wait_for(lambda: closed_records(repo) == [("interrupted", "expired")], 20,
                     "the server to close the episode past the grace")
        finally:
            client.proc.send_signal(signal.SIGCONT)
        # the replayed attach resumes only: it opens nothing, and the client holds no episode until it attaches
        assert mine(client, 3) is None
        assert open_file(repo, "ep-frozen") is None
        again = structured(client.request(call(4, "majordomus_session_attach", {"external_id": "ep-frozen"}),
                                          timeout=30))
        assert again["resumed"] is False, again
        assert again["episode"]["state"] == "open"
        structured(client.request(call(5, "majordomus_session_detach", {}), timeout=30))
    assert closed_records(repo) == [("closed", "detach"), ("interrupted", "expired")]
