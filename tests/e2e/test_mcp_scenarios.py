"""REFERENCE §12 B–E, §13 2–6 and the SPEC §9 demonstration, through the real `majordomus-mcp` with real frames."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from clients.samples import CONNECTION
from mcp_support import (
    INITIALIZED,
    LEASE,
    MAJORDOMUS_MCP,
    OPEN,
    McpProcess,
    call,
    fingerprint,
    front_matter,
    initialize,
    run_mcp,
    structured,
)


def test_spec_9_demonstration_holds_as_written(initialised_repo: Path) -> None:
    """SPEC §9, the shell pipeline verbatim (jq included when installed), then the commands after it."""
    frames = (
        '\'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},'
        '"clientInfo":{"name":"anything","version":"0"}}}\' '
        '\'{"jsonrpc":"2.0","method":"notifications/initialized"}\' '
        '\'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"majordomus_session_attach",'
        '"arguments":{"external_id":"my-thread"}}}\' '
        '\'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"majordomus_session_detach",'
        '"arguments":{}}}\''
    )
    tail = " | jq -r '.result.structuredContent.episode.repository // empty'" if shutil.which("jq") else ""
    done = subprocess.run(["bash", "-c", f"set -o pipefail; printf '%s\\n' {frames} | majordomus-mcp --http-port 0"
                                         f"{tail}"], cwd=initialised_repo, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    if tail:
        lines = done.stdout.splitlines()
    else:
        lines = [json.loads(x)["result"].get("structuredContent", {}).get("episode", {}).get("repository")
                 for x in done.stdout.splitlines()]
        lines = [x for x in lines if x]
    assert len(lines) == 2, done.stdout
    assert re.fullmatch(r"session s-\d{14}-[0-9a-f]{4} opened at \S+Z \(head [0-9a-f]{7}\)", lines[0])
    assert re.fullmatch(r"episode closed \(closed, reason detach\) into \.ai/repo/sessions/\S+\.md", lines[1])
    record = initialised_repo / lines[1].rsplit(" into ", 1)[1]
    assert front_matter(record)["outcome"] == "closed"

    def mj(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["majordomus", *args], cwd=initialised_repo, capture_output=True, text=True, timeout=60)

    status = mj("capture", "status")
    assert status.returncode == 0
    assert re.search(rf"^{CONNECTION}:session\s+connection\s+verified", status.stdout, re.M), status.stdout
    for args in (["capture", "reconcile", "--dry-run"], ["capture", "reconcile"], ["capture", "prune", "--dry-run"]):
        assert mj(*args).returncode == 0, args
    doctor = mj("doctor")
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert re.search(r"^OK\s+prompts\s+\.ai/local/prompts", doctor.stdout, re.M)


def test_b_initialize_opens_nothing(initialised_repo: Path) -> None:
    """1. fingerprint; 2. initialize, initialized, majordomus_episodes. Result: exit 0, open == 0, no `mine`,
    nothing in sessions-open, the fingerprint unchanged."""
    before = fingerprint(initialised_repo)
    code, out, err = run_mcp(initialised_repo, [initialize("case200-reader"), INITIALIZED,
                                                call(2, "majordomus_episodes")], "--http-port", "0")
    assert code == 0, err
    listing = structured(out[1])
    assert listing["open"] == 0 and "mine" not in listing
    assert not list((initialised_repo / OPEN).glob("*.yaml"))
    assert fingerprint(initialised_repo) == before


def test_c_attach_list_detach_in_one_connection(initialised_repo: Path) -> None:
    ep = "thread-200-alpha"
    code, out, err = run_mcp(initialised_repo, [
        initialize(), INITIALIZED, call(2, "majordomus_session_attach", {"external_id": ep}),
        call(3, "majordomus_episodes"), call(4, "majordomus_session_detach", {}), call(5, "majordomus_episodes"),
    ], "--http-port", "0")
    assert code == 0, err
    attached = structured(out[1])
    assert attached["resumed"] is False and attached["reattach_grace_seconds"] > 0
    episode = attached["episode"]
    assert (episode["external_id"], episode["state"], episode["provider"]) == (ep, "open", CONNECTION)
    assert re.search("opened|kept", episode["repository"])
    listing = structured(out[2])
    assert listing["mine"]["external_id"] == ep and listing["open"] == 1
    closed = structured(out[3])["episode"]
    assert closed["state"] == "detached" and "peer" not in closed
    assert closed["repository"].startswith("episode closed (closed, reason detach)")
    after = structured(out[4])
    assert after["open"] == 0 and after["detached"] == 0
    assert not (initialised_repo / OPEN / f"{ep}.yaml").exists()
    assert list((initialised_repo / ".ai/repo/sessions").glob("2*.md"))


def test_d_kill_9_then_resume_instead_of_a_second_episode(initialised_repo: Path) -> None:
    """1. attach EP2 on a server whose stdin stays open; 2. kill -9 it; 3. the open file is still there;
    4. a new server attaches EP2 and detaches. Result: `kept`, and no open file left (one episode, closed)."""
    ep = "thread-200-crash"
    path = initialised_repo / OPEN / f"{ep}.yaml"
    with McpProcess(initialised_repo, "--http-port", "0") as server:
        server.send(initialize(), INITIALIZED, call(2, "majordomus_session_attach", {"external_id": ep}))
        server.answer(1)
        first = structured(server.answer(2))["episode"]
        assert first["state"] == "open" and first["attachments"] == 1
        assert "session_id:" in path.read_text() and "attachments: 1" in path.read_text()
        os.kill(server.proc.pid, signal.SIGKILL)
        server.proc.wait(timeout=10)
    assert path.exists()
    code, out, err = run_mcp(initialised_repo, [initialize(), INITIALIZED,
                                                call(2, "majordomus_session_attach", {"external_id": ep}),
                                                call(3, "majordomus_session_detach", {})], "--http-port", "0")
    assert code == 0, err
    assert "stale lease" in err
    again = structured(out[1])
    assert re.search("kept|already open", again["episode"]["repository"])
    # the answer is true (SPEC 4.3): the episode's own start, a resume, both attachments counted
    assert again["resumed"] is True and again["episode"]["attachments"] == 2
    assert again["episode"]["opened_at"] == first["opened_at"]
    assert not path.exists()
    sessions = list((initialised_repo / ".ai/repo/sessions").glob("2*.md"))
    assert len(sessions) == 1 and front_matter(sessions[0])["outcome"] == "closed"


def test_e_a_bridged_second_visit_resumes_the_detached_episode(initialised_repo: Path) -> None:
    ep = "thread-200-reattach"
    with McpProcess(initialised_repo, "--http-port", "0") as holder:
        holder.url()
        holder.request(initialize("holder"))
        code, out, err = run_mcp(initialised_repo, [initialize("first-visit"), INITIALIZED,
                                                    call(2, "majordomus_session_attach", {"external_id": ep})])
        assert code == 0, err
        assert "bridging this stdio session to it" in err and "listening on" not in err
        assert structured(out[1])["episode"]["state"] == "open"
        code, out, err = run_mcp(initialised_repo, [initialize("second-visit"), INITIALIZED,
                                                    call(2, "majordomus_episodes"),
                                                    call(3, "majordomus_session_attach", {"external_id": ep}),
                                                    call(4, "majordomus_session_detach", {})])
        assert code == 0, err
        mine = [e for e in structured(out[1])["episodes"] if e["external_id"] == ep]
        assert len(mine) == 1 and mine[0]["state"] == "detached"
        resumed = structured(out[2])
        assert resumed["resumed"] is True and resumed["episode"]["external_id"] == ep
        assert resumed["episode"]["attachments"] == 2
        assert structured(out[3])["episode"]["repository"].startswith("episode closed (closed, reason detach)")
        holder.close_stdin()
        assert holder.wait() == 0
    assert not (initialised_repo / LEASE).exists()


def test_13_2_one_client(initialised_repo: Path) -> None:
    before = fingerprint(initialised_repo)
    code, out, err = run_mcp(initialised_repo, [initialize("case90-first"), INITIALIZED, call(2, "majordomus_peers")],
                             "--http-port", "0")
    assert code == 0, err
    assert len(out) == 2 and all(f["jsonrpc"] == "2.0" and isinstance(f["id"], int) for f in out)
    url = re.search(r"shared server listening on (http://127\.0\.0\.1:\d+)", err).group(1)  # type: ignore[union-attr]
    assert f"{url}/swagger" in err and f"{url}/mcp" in err
    instructions = out[0]["result"]["instructions"]
    assert url in instructions and "You are peer p1" in instructions
    peers = structured(out[1])
    assert peers["count"] == 1
    assert peers["peers"][0]["client"]["name"] == "case90-first" and peers["peers"][0]["transport"] == "stdio"
    assert "shared server stopped" in err
    assert not (initialised_repo / LEASE).exists()
    assert fingerprint(initialised_repo) == before


def test_13_3_two_clients_share_one_server(initialised_repo: Path) -> None:
    with McpProcess(initialised_repo, "--http-port", "0") as first:
        url = first.url()
        lease = json.loads((initialised_repo / LEASE).read_text())
        assert lease["schema"] == "majordomus-mcp-lease/v1" and lease["url"].startswith("http://127.0.0.1:")
        assert lease["url"] == url
        first.request(initialize("case90-first"))
        code, out, err = run_mcp(initialised_repo, [
            initialize("case90-second"), INITIALIZED,
            call(2, "majordomus_announce", {"intent": "case 90 is running", "scope": ["test/cases"]}),
            call(3, "majordomus_peers"),
            call(4, "majordomus_announce", {"intent": "case 90 claims ground p1 already holds",
                                            "scope": ["test/cases/90_mcp_shared_server.sh"]}),
        ])
        assert code == 0, err
        assert "bridging this stdio session to it" in err and "listening on" not in err
        instructions = out[0]["result"]["instructions"]
        assert "You are peer p2" in instructions and "case90-first" in instructions
        assert out[1]["result"]["isError"] is False
        assert structured(out[1])["announcement"]["intent"] == "case 90 is running"
        peers = structured(out[2])
        assert peers["count"] == 2
        assert sorted(p["client"]["name"] for p in peers["peers"]) == ["case90-first", "case90-second"]
        assert out[3]["result"]["isError"] is False and structured(out[3])["overlaps"] == []
        first.close_stdin()
        assert first.wait() == 0
    assert not (initialised_repo / LEASE).exists()


def test_13_4_standalone_serves_alone(initialised_repo: Path) -> None:
    code, out, err = run_mcp(initialised_repo, [initialize("case90-first"), INITIALIZED, call(2, "majordomus_peers")],
                             "--standalone")
    assert code == 0, err
    assert "listening on" not in err
    assert not (initialised_repo / LEASE).exists()
    assert "http://" not in out[0]["result"]["instructions"]
    assert structured(out[1])["count"] == 1


@pytest.mark.parametrize(("content", "word"), [(b"{not a lease", "corrupt lease"), (b"", "empty lease"),
                                                 (b'{"schema": "other"}', "corrupt lease")])
def test_13_5_a_broken_lease_is_taken_over(initialised_repo: Path, content: bytes, word: str) -> None:
    lease = initialised_repo / LEASE
    lease.parent.mkdir(parents=True, exist_ok=True)
    lease.write_bytes(content)
    code, out, err = run_mcp(initialised_repo, [initialize("case90-first"), INITIALIZED, call(2, "majordomus_peers")],
                             "--http-port", "0")
    assert code == 0, err
    assert word in err and "listening on http://127.0.0.1:" in err
    assert len(out) == 2
    assert not lease.exists()


def test_13_5_a_stale_lease_of_a_dead_pid_is_taken_over(initialised_repo: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    lease = initialised_repo / LEASE
    lease.parent.mkdir(parents=True, exist_ok=True)
    lease.write_text(json.dumps({"schema": "majordomus-mcp-lease/v1", "pid": dead.pid, "token": "x" * 32,
                                 "root": str(initialised_repo), "url": "http://127.0.0.1:9", "started_at": "",
                                 "executable": {}}))
    code, out, err = run_mcp(initialised_repo, [initialize(), call(2, "majordomus_peers")], "--http-port", "0")
    assert code == 0 and "stale lease" in err and len(out) == 2


def test_13_6_help_names_the_usage_and_standalone() -> None:
    done = subprocess.run([str(MAJORDOMUS_MCP), "--help"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0
    assert re.match(r"^Usage: majordomus mcp", done.stdout) and "standalone" in done.stdout


def test_an_unknown_option_is_a_usage_error(initialised_repo: Path) -> None:
    done = subprocess.run([str(MAJORDOMUS_MCP), "--bogus"], cwd=initialised_repo, capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == 2 and done.stderr.startswith("majordomus: unknown option")


def test_outside_a_repository_exits_12(tmp_path: Path) -> None:
    done = subprocess.run([str(MAJORDOMUS_MCP)], cwd=tmp_path, capture_output=True, text=True, timeout=30)
    assert done.returncode == 12 and "not inside a git repository" in done.stderr
