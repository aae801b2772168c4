"""When the lease holder is killed (`kill -9`) while clients are bridged to it, a bridged client
notices nothing.

1. A holder serves; two clients bridge to it and attach their episodes; 2. the holder is killed -9; 3. one
bridge speaks first and becomes the server (its start-up reap runs with a 1 s grace); 4. the other bridge stays
silent past the grace; 5. then it detaches on purpose. Result: its episode was never reaped while its bridge
lived, it ends `closed` (the client closed it on purpose), one record per sitting, and no replay opened an
episode that its client had not attached.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mcp_support import LEASE, OPEN, McpProcess, call, initialize, open_file, set_policy, structured
from support import MAJORDOMUS, records

INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
# keepalives every 20 s: the silent bridge says nothing for the whole test unless its client speaks
QUIET = {"MAJORDOMUS_HTTP_IDLE_SECONDS": "60", "MAJORDOMUS_REAP_INTERVAL_SECONDS": "0.2"}


def bridged(repo: Path, name: str, external_id: str) -> McpProcess:
    client = McpProcess(repo, env=QUIET)
    client.request(initialize(name))
    client.send(INITIALIZED)
    structured(client.request(call(2, "majordomus_session_attach", {"external_id": external_id})))
    client.wait_stderr("bridging this stdio session to it")
    return client


def by_session(repo: Path) -> list[tuple[str, str, str]]:
    """(file name, outcome, end reason) of every closed record."""
    rows = []
    for path, record in records(repo).items():
        rows.append((path, record["outcome"], record["end_reason"]))
    return rows


def test_a_silent_bridge_keeps_its_episode_through_failover_and_closes_it_on_purpose(initialised_repo: Path
                                                                                    ) -> None:
    set_policy(initialised_repo, episodes__reattach_grace_seconds=1)
    with McpProcess(initialised_repo, "--http-port", "0", env=QUIET) as holder:
        holder.url()
        holder.request(initialize("holder"))
        first, silent = bridged(initialised_repo, "first", "ep-first"), bridged(initialised_repo, "silent", "ep-silent")
        try:
            os.kill(holder.proc.pid, signal.SIGKILL)
            holder.proc.wait(timeout=10)
            listing = structured(first.request(call(3, "majordomus_episodes"), timeout=30))
            assert listing["mine"]["external_id"] == "ep-first"
            first.wait_stderr("re-attached to the shared server (this process serves it now)")
            time.sleep(3.0)  # three graces and a dozen reaper ticks: the silent bridge still lives
            recovered = subprocess.run([str(MAJORDOMUS), "capture", "recover"], cwd=initialised_repo,
                                       capture_output=True, timeout=60)  # what any hook start runs too
            assert recovered.returncode == 0, recovered.stderr
            assert open_file(initialised_repo, "ep-silent") is not None, by_session(initialised_repo)
            answer = silent.request(call(3, "majordomus_session_detach", {}), timeout=30)
            closed = structured(answer)
            assert closed["episode"]["external_id"] == "ep-silent"
            assert "closed" in closed["episode"]["repository"]
            assert "re-attached to the shared server at" in silent.stderr
            closed = structured(first.request(call(4, "majordomus_session_detach", {}), timeout=30))
            assert closed["episode"]["external_id"] == "ep-first"
        finally:
            for client in (first, silent):
                client.kill()
    rows = by_session(initialised_repo)
    assert sorted((outcome, reason) for _, outcome, reason in rows) == [("closed", "detach"), ("closed", "detach")]
    assert list((initialised_repo / OPEN).glob("*.yaml")) == []


def test_a_replay_never_opens_an_episode_its_client_did_not_attach(initialised_repo: Path) -> None:
    """The silent bridge's episode is closed meanwhile (its end is drawn through `capture session`, as any
    caller may): its replayed attach must not open a second episode for the sitting."""
    with McpProcess(initialised_repo, "--http-port", "0", env=QUIET) as holder:
        holder.url()
        holder.request(initialize("holder"))
        first, silent = bridged(initialised_repo, "first", "ep-first"), bridged(initialised_repo, "silent", "ep-gone")
        try:
            os.kill(holder.proc.pid, signal.SIGKILL)
            holder.proc.wait(timeout=10)
            structured(first.request(call(3, "majordomus_episodes"), timeout=30))
            ended = subprocess.run([str(MAJORDOMUS), "capture", "session", "--provider", "generic", "--event", "end"],
                                   cwd=initialised_repo, input=b'{"session_id": "ep-gone", "reason": "detach"}',
                                   capture_output=True, timeout=60)
            assert ended.returncode == 0, ended.stderr
            assert open_file(initialised_repo, "ep-gone") is None
            answer = silent.request(call(3, "majordomus_episodes"), timeout=30)
            assert "re-attached to the shared server at" in silent.stderr
            assert "mine" not in structured(answer)  # it holds nothing now, and nothing was opened for it
            assert open_file(initialised_repo, "ep-gone") is None
        finally:
            for client in (first, silent):
                client.kill()
    assert len(by_session(initialised_repo)) == 1


@pytest.mark.parametrize("header", ["x", "12a", "-4", "9" * 12, "0"])
def test_a_malformed_bridge_pid_header_is_refused_with_a_sentence(initialised_repo: Path, header: str) -> None:
    import httpx

    from mcp_support import auth

    with McpProcess(initialised_repo, "--http-port", "0") as server:
        url = server.url()
        response = httpx.post(f"{url}/mcp", json=initialize("bridge"), timeout=10,
                              headers={**auth(initialised_repo), "X-Majordomus-Bridge": "1",
                                       "X-Majordomus-Bridge-Pid": header, "Accept": "application/json"})
        assert response.status_code == 400
        assert "X-Majordomus-Bridge-Pid" in response.json()["error"]["message"]



def _gone_under_a_dead_server(repo: Path, reason: str, arguments: dict[str, str]) -> tuple[dict, str]:
    """The holder carries out the silent client's detach and dies before answering (its end is drawn through
    `capture session` with the reason the board gives, as the dead server did); the bridge then retries the
    detach on the next server, after its replay found the episode gone. The retry's answer, and the stderr."""
    with McpProcess(repo, "--http-port", "0", env=QUIET) as holder:
        holder.url()
        holder.request(initialize("holder"))
        first, silent = bridged(repo, "first", "ep-first"), bridged(repo, "silent", "ep-lost")
        try:
            os.kill(holder.proc.pid, signal.SIGKILL)
            holder.proc.wait(timeout=10)
            structured(first.request(call(3, "majordomus_episodes"), timeout=30))
            ended = subprocess.run([str(MAJORDOMUS), "capture", "session", "--provider", "generic", "--event", "end"],
                                   cwd=repo, input=('{"session_id": "ep-lost", "reason": "%s"}' % reason).encode(),
                                   capture_output=True, timeout=60)
            assert ended.returncode == 0, ended.stderr
            answer = silent.request(call(3, "majordomus_session_detach", arguments), timeout=30)
            assert "re-attached to the shared server at" in silent.stderr
            return answer, silent.stderr
        finally:
            for client in (first, silent):
                client.kill()


@pytest.mark.parametrize("arguments", [{}, {"external_id": "ep-lost"}], ids=["its-own", "named"])
def test_a_detach_whose_answer_died_with_its_server_is_answered_on_the_bridges_retry(
        initialised_repo: Path, arguments: dict[str, str]) -> None:
    """Found by the soak: the record said `closed` (right), the client was told "holds no episode" (wrong)."""
    answer, _ = _gone_under_a_dead_server(initialised_repo, "detach", arguments)
    episode = structured(answer)["episode"]
    assert episode["external_id"] == "ep-lost" and episode["provider"] == "generic"
    assert episode["repository"].startswith("episode closed (closed, reason detach) into .ai/repo/sessions/")
    (record,) = [r for r in records(initialised_repo).values() if r["end_reason"] == "detach"]
    assert episode["opened_at"] == record["started_at"]
    assert episode["repository"].endswith(".md") and Path(episode["repository"].rsplit(" ", 1)[1]).name in \
        {Path(p).name for p in records(initialised_repo)}
    assert len(records(initialised_repo)) == 1  # nothing opened, nothing closed twice


def test_a_retried_detach_of_an_episode_that_ended_otherwise_is_refused_with_the_truth(initialised_repo: Path
                                                                                      ) -> None:
    answer, _ = _gone_under_a_dead_server(initialised_repo, "expired", {})
    assert answer["result"]["isError"] is True
    text = answer["result"]["content"][0]["text"]
    assert "ep-lost" in text and "interrupted" in text and "expired" in text, text
    assert len(records(initialised_repo)) == 1


# A server that answers the election's probe as the lease's writer, then dies at the first frame a bridge relays to
# it: what a bridge meets when the server it has just elected is killed in its turn before the replay is through.
DIES_AT_THE_REPLAY = r'''
import hashlib, json, os, socket, sys
token = sys.argv[1]
listener = socket.create_server(("127.0.0.1", 0))
print(listener.getsockname()[1], flush=True)
while True:
    conn, _ = listener.accept()
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = conn.recv(65536)
        if not chunk:
            break
        head += chunk
    if head.startswith(b"GET /api/v1/live"):
        body = json.dumps({"live": True, "pid": os.getpid(), "stopping": False,
                           "lease": hashlib.sha256(token.encode()).hexdigest()[:16]}).encode()
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
                     b"Content-Length: %d\r\n\r\n" % len(body) + body)
        conn.close()
        continue
    listener.close()  # killed: nothing listens any more, and the frame gets no answer
    conn.close()
    os._exit(0)
'''


def test_a_server_killed_during_the_replay_is_elected_over_and_the_request_still_answered(
        initialised_repo: Path, tmp_path: Path) -> None:
    """Two lease holders die one after the other: the bridge elects the second, which dies before the replay is
    through. The bridge elects again (here it serves), replays, and answers its client's request: the soak found
    that request unanswered for good ("a frame could not be handled (ServerGone ...)")."""
    script = tmp_path / "dies-like-a-majordomus-server.py"  # its command line names majordomus: a live server's pid
    script.write_text(DIES_AT_THE_REPLAY)
    with McpProcess(initialised_repo, "--http-port", "0", env=QUIET) as holder:
        holder.url()
        holder.request(initialize("holder"))
        client = bridged(initialised_repo, "client", "ep-twice")
        token = "t" * 43
        second = subprocess.Popen([sys.executable, str(script), token], stdout=subprocess.PIPE)
        try:
            assert second.stdout is not None
            port = int(second.stdout.readline())
            os.kill(holder.proc.pid, signal.SIGKILL)
            holder.proc.wait(timeout=10)
            lease_file = initialised_repo / LEASE
            lease = json.loads(lease_file.read_text())
            lease.update(pid=second.pid, url=f"http://127.0.0.1:{port}", token=token)
            lease_file.write_text(json.dumps(lease))
            listing = structured(client.request(call(3, "majordomus_episodes"), timeout=30))
            assert listing["mine"]["external_id"] == "ep-twice"
            assert second.wait(timeout=10) == 0  # it was elected, and died at the replay
            assert f"re-attached to the shared server at http://127.0.0.1:{port}" in client.stderr
            client.wait_stderr("re-attached to the shared server (this process serves it now)")
            assert "could not be handled" not in client.stderr, client.stderr
            closed = structured(client.request(call(4, "majordomus_session_detach", {}), timeout=30))
            assert closed["episode"]["external_id"] == "ep-twice"
        finally:
            client.kill()
            if second.poll() is None:
                second.kill()
            second.wait()
    assert sorted((outcome, reason) for _, outcome, reason in by_session(initialised_repo)) == [("closed", "detach")]
    assert list((initialised_repo / OPEN).glob("*.yaml")) == []
