"""The server's lifetime: signals, the last peer, re-election, `serve`, the grace and the start-up reap."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
from pathlib import Path

import pytest

from majordomus.identity import now_utc, parse_rfc3339
from mcp_support import (
    INITIALIZED,
    LEASE,
    OPEN,
    McpProcess,
    call,
    fingerprint,
    front_matter,
    initialize,
    modern,
    open_file,
    run_mcp,
    set_policy,
    structured,
    wait_for,
)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_signal_runs_the_one_cleanup_path(initialised_repo: Path, sig: signal.Signals) -> None:
    """1. a server attaches an episode; 2. it gets the signal. Result: it exits 0, the lease is gone, and the
    episode is detached (its open file says when), not closed."""
    ep = f"signal-{sig.name.lower()}"
    with McpProcess(initialised_repo, "--http-port", "0") as server:
        server.url()
        server.send(initialize(), call(2, "majordomus_session_attach", {"external_id": ep}))
        server.answer(2)
        server.proc.send_signal(sig)
        assert server.wait() == 0
        assert "shared server stopped" in server.stderr
    assert not (initialised_repo / LEASE).exists()
    state = open_file(initialised_repo, ep)
    assert state is not None and str(state["detached_at"]).startswith("20") and state.get("held_by") is None
    assert not list((initialised_repo / ".ai/repo/sessions").glob("2*.md"))


def test_the_last_peer_keeps_the_server_alive(initialised_repo: Path) -> None:
    """1. the server's own client leaves while a bridged peer is attached; 2. the peer leaves.
    Result: `serving until the last peer leaves`, then `shared server stopped` and no lease."""
    with McpProcess(initialised_repo, "--http-port", "0") as server:
        server.url()
        peer = McpProcess(initialised_repo)
        server.request(initialize("owner"))
        peer.request(initialize("peer"))
        server.close_stdin()
        server.wait_stderr("serving until the last peer leaves")
        assert server.proc.poll() is None
        peer.close_stdin()
        assert peer.wait() == 0
        assert server.wait() == 0
        peer.kill()
        assert "shared server stopped" in server.stderr
    assert not (initialised_repo / LEASE).exists()


def test_a_bridge_elects_again_when_its_server_dies(initialised_repo: Path) -> None:
    """1. a holder serves; 2. a bridged client attaches EP; 3. the holder is killed -9; 4. the client calls again.
    Result: the bridge becomes the server, replays initialize and the attach, and the client still holds EP."""
    ep = "thread-reelect"
    with McpProcess(initialised_repo, "--http-port", "0") as holder:
        holder.url()
        client = McpProcess(initialised_repo)
        client.request(initialize("survivor"))
        client.send(INITIALIZED)
        assert structured(client.request(call(2, "majordomus_session_attach", {"external_id": ep})))
        client.wait_stderr("bridging this stdio session to it")
        os.kill(holder.proc.pid, signal.SIGKILL)
        holder.proc.wait(timeout=10)
        listing = structured(client.request(call(3, "majordomus_episodes"), timeout=30))
        assert listing["mine"]["external_id"] == ep and listing["mine"]["state"] == "open"
        assert re.search("kept|already open", listing["mine"]["repository"])
        assert "re-attached to the shared server" in client.stderr
        closed = structured(client.request(call(4, "majordomus_session_detach", {})))
        assert closed["episode"]["repository"].startswith("episode closed (closed")
        client.close_stdin()
        assert client.wait() == 0
        client.kill()
    assert not (initialised_repo / OPEN / f"{ep}.yaml").exists()


def test_serve_runs_the_shared_server_without_a_client_until_a_signal(initialised_repo: Path) -> None:
    """1. `majordomus serve --http-port 0`; 2. a stdio client bridges to it and leaves; 3. a second serve is
    refused; 4. SIGTERM. Result: the server outlives its peers, the second serve exits 15, the lease goes."""
    serve = subprocess.Popen(["majordomus", "serve", "--http-port", "0"], cwd=initialised_repo,
                             stderr=subprocess.PIPE, text=True)
    try:
        assert serve.stderr is not None
        first = serve.stderr.readline()
        assert "shared server listening on http://127.0.0.1:" in first
        code, out, err = run_mcp(initialised_repo, [initialize("visitor"), call(2, "majordomus_peers")])
        assert code == 0 and "bridging this stdio session to it" in err
        assert structured(out[1])["count"] == 1
        assert serve.poll() is None
        again = subprocess.run(["majordomus", "serve", "--http-port", "0"], cwd=initialised_repo,
                               capture_output=True, text=True, timeout=30)
        assert again.returncode == 15 and "already serves this repository" in again.stderr
        serve.send_signal(signal.SIGTERM)
        assert serve.wait(timeout=20) == 0
        assert "shared server stopped" in serve.stderr.read()
    finally:
        if serve.poll() is None:
            serve.kill()
    assert not (initialised_repo / LEASE).exists()


def records_by_outcome(repo: Path) -> list[tuple[str, str]]:
    return sorted((fm["outcome"], fm["end_reason"]) for fm in
                  (front_matter(p) for p in (repo / ".ai/repo/sessions").glob("2*.md")))


@pytest.mark.slow
def test_a_detached_episode_past_the_grace_is_closed_interrupted(initialised_repo: Path) -> None:
    """1. grace 1 s; 2. a bridged client attaches and leaves (EOF: detached); 3. the holder's reaper runs.
    Result: one record, `interrupted` with reason `expired`; the open file is gone."""
    set_policy(initialised_repo, episodes__reattach_grace_seconds=1)
    with McpProcess(initialised_repo, "--http-port", "0", env={"MAJORDOMUS_REAP_INTERVAL_SECONDS": "0.2"}) as holder:
        holder.url()
        holder.request(initialize("holder"))
        code, _, err = run_mcp(initialised_repo, [initialize("leaver"),
                                                  call(2, "majordomus_session_attach", {"external_id": "graceful"})])
        assert code == 0, err
        wait_for(lambda: open_file(initialised_repo, "graceful") is None, 15, "the reaper to close it")
        assert records_by_outcome(initialised_repo) == [("interrupted", "expired")]
        holder.close_stdin()
        assert holder.wait() == 0


@pytest.mark.slow
def test_a_killed_servers_episode_is_closed_by_a_later_start_up_reap(initialised_repo: Path) -> None:
    """1. grace 1 s; 2. a server attaches EP and is killed -9; 3. a new server starts (stamps `detached_at`);
    4. after the grace another start-up. Result: EP closed `interrupted`, reason `expired`; nothing resumed it."""
    set_policy(initialised_repo, episodes__reattach_grace_seconds=1)
    with McpProcess(initialised_repo, "--standalone") as server:
        server.request(initialize())
        structured(server.request(call(2, "majordomus_session_attach", {"external_id": "orphan"})))
        os.kill(server.proc.pid, signal.SIGKILL)
        server.proc.wait(timeout=10)
    assert open_file(initialised_repo, "orphan")["detached_at"] is None  # type: ignore[index]
    code, _, err = run_mcp(initialised_repo, [initialize()], "--standalone")
    assert code == 0, err
    stamp = wait_for(lambda: (open_file(initialised_repo, "orphan") or {}).get("detached_at"), 10, "the stamp")
    # The grace must have run out on recover's own clock (RFC 3339 seconds), not just on ours.
    wait_for(lambda: (now_utc() - parse_rfc3339(str(stamp))).total_seconds() > 1, 10, "the grace to pass")
    code, _, err = run_mcp(initialised_repo, [initialize(), call(2, "majordomus_peers")], "--standalone")
    assert code == 0, err
    assert open_file(initialised_repo, "orphan") is None
    assert records_by_outcome(initialised_repo) == [("interrupted", "expired")]


def test_a_stateless_client_over_a_bridged_stdio_is_a_connection_peer(initialised_repo: Path) -> None:
    """1. a holder serves; 2. a bridged stdio client speaks 2026-07-28 (no initialize), attaches and leaves.
    Result: the process was the peer — `mine` without naming the id — and its EOF detached the episode."""
    with McpProcess(initialised_repo, "--http-port", "0") as holder:
        holder.url()
        holder.request(initialize("holder"))
        code, out, err = run_mcp(initialised_repo, [
            modern(1, "server/discover"),
            modern(2, "tools/call", {"name": "majordomus_session_attach", "arguments": {"external_id": "modern-ep"}}),
            modern(3, "tools/call", {"name": "majordomus_episodes", "arguments": {}}),
        ])
        assert code == 0 and "bridging this stdio session to it" in err
        assert "2026-07-28" in out[0]["result"]["supportedVersions"]
        assert out[1]["result"]["resultType"] == "complete"
        assert structured(out[2])["mine"]["external_id"] == "modern-ep"
        wait_for(lambda: (open_file(initialised_repo, "modern-ep") or {}).get("detached_at"), 10, "the detach")
        holder.close_stdin()
        assert holder.wait() == 0


def test_a_repository_without_the_layer_is_served_alone_and_left_untouched(git_repo: Path) -> None:
    before = fingerprint(git_repo)
    code, out, err = run_mcp(git_repo, [initialize(), call(2, "majordomus_session_attach", {"external_id": "t"})])
    assert code == 0 and "cannot use the shared server" in err
    assert structured(out[1])["episode"]["repository"].endswith("has no majordomus layer; run majordomus init")
    assert fingerprint(git_repo) == before and not (git_repo / ".ai").exists()


def test_a_taken_port_is_replaced_by_a_free_one(initialised_repo: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        code, out, err = run_mcp(initialised_repo, [initialize(), call(2, "majordomus_peers")],
                                 "--http-port", str(port))
    assert code == 0 and f"port {port} is taken" in err
    url = re.search(r"listening on (http://127\.0\.0\.1:(\d+))", err)
    assert url is not None and int(url.group(2)) != port
    assert url.group(1) in out[0]["result"]["instructions"]


def test_a_bridge_that_gets_sigterm_detaches_its_episode(initialised_repo: Path) -> None:
    """1. a holder serves; 2. a bridged client attaches; 3. the bridge process gets SIGTERM.
    Result: it exits 0 after its DELETE; the episode is detached on the holder, not closed."""
    with McpProcess(initialised_repo, "--http-port", "0") as holder:
        holder.url()
        holder.request(initialize("holder"))
        bridge = McpProcess(initialised_repo)
        bridge.request(initialize("bridged"))
        structured(bridge.request(call(2, "majordomus_session_attach", {"external_id": "termed"})))
        bridge.proc.send_signal(signal.SIGTERM)
        assert bridge.wait() == 0
        bridge.kill()
        listing = structured(holder.request(call(3, "majordomus_episodes")))
        assert [(e["external_id"], e["state"]) for e in listing["episodes"]] == [("termed", "detached")]
        holder.close_stdin()
        assert holder.wait() == 0
