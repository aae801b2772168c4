"""SPEC §4.3: one sitting, one episode, by evidence and never by time.

A client with hooks that also runs the MCP server (its model following the server's instructions) must not get
a second, unlinked `generic` episode. The client here is a real process of its own, as Claude Code is: it runs
its start hook through `sh -c` and spawns `majordomus-mcp` directly, then attaches through real stdio frames.
The evidence that ties the two is that process (`<pid>@<start ticks>`): the hook writes it into the open file,
the server (or the bridge in front of it) knows its own parent.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcp_support import McpProcess, auth, call, initialize, structured
from support import MAJORDOMUS, MAJORDOMUS_MCP, open_files, records

# A client program: optionally runs its SessionStart hook the way Claude Code does (`sh -c`), then spawns the
# project's MCP server itself, attaches (and detaches when asked), and prints the answers as one JSON line.
CLIENT = textwrap.dedent("""
    import json, os, shlex, subprocess, sys
    majordomus, server, session, client_name, external, steps = sys.argv[1:7]
    # "twice": a second conversation started in the same process (Cline's /clear: a new session, no end for the first)
    for conversation in ([session] if "start" in steps else []) + ([session + "-2"] if "twice" in steps else []):
        subprocess.run(["sh", "-c", shlex.quote(majordomus) + " capture session --provider claude-code --event start"],
                       input=json.dumps({"session_id": conversation, "source": "startup"}).encode(), check=True,
                       capture_output=True)
    proc = subprocess.Popen([server], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    def ask(message):
        proc.stdin.write(json.dumps(message).encode() + b"\\n"); proc.stdin.flush()
        while True:
            frame = json.loads(proc.stdout.readline())
            if frame.get("id") == message.get("id"):
                return frame
    answers = [ask({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18",
                    "capabilities": {}, "clientInfo": {"name": client_name, "version": "1"}}})]
    proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\\n')
    answers.append(ask({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "majordomus_session_attach", "arguments": {"external_id": external}}}))
    if "detach" in steps:
        answers.append(ask({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "majordomus_session_detach", "arguments": {}}}))
    proc.stdin.close()
    proc.wait(timeout=30)
    print(json.dumps({"pid": os.getpid(), "answers": answers}))
""")


def sit(repo: Path, *, steps: str = "start", session: str = "cc-one", client_name: str = "claude-code",
        external: str = "thread-1") -> list[dict[str, Any]]:
    """One sitting of the client program in `repo`; the frames it got back (initialize, attach, detach?)."""
    return sit_as_process(repo, steps=steps, session=session, client_name=client_name, external=external)["answers"]


def sit_as_process(repo: Path, *, steps: str = "start", session: str = "cc-one", client_name: str = "claude-code",
                   external: str = "thread-1") -> dict[str, Any]:
    script = repo.parent / "client.py"
    script.write_text(CLIENT)
    done = subprocess.run([sys.executable, str(script), str(MAJORDOMUS), str(MAJORDOMUS_MCP), session, client_name,
                           external, steps], cwd=repo, capture_output=True, timeout=90)
    assert done.returncode == 0, done.stderr.decode()
    return json.loads(done.stdout)


def install_claude_hooks(repo: Path) -> None:
    done = subprocess.run([str(MAJORDOMUS), "capture", "install", "--provider", "claude-code"], cwd=repo,
                          capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode()


def hook_episode(repo: Path, session: str) -> dict[str, Any]:
    found = [o for o in open_files(repo).values() if o.get("provider_session") == session]
    assert len(found) == 1, open_files(repo)
    return found[0]


def test_the_attach_of_a_hook_client_answers_with_its_hook_episode_and_opens_none(initialised_repo: Path) -> None:
    answers = sit(initialised_repo)
    result = structured(answers[1])
    episode = hook_episode(initialised_repo, "cc-one")
    assert result["episode"]["session_id"] == episode["session_id"]
    assert result["episode"]["provider"] == "claude-code"
    assert result["episode"]["opened_at"] == episode["started_at"]  # the episode's own start, not the attach's
    assert result["resumed"] is False
    assert episode["session_id"] in result["hooks"] and "no second episode" in result["hooks"]
    assert [o["provider"] for o in open_files(initialised_repo).values()] == ["claude-code"]  # no generic one
    assert episode["client"].split("@")[0].isdigit()


def test_the_hook_start_names_the_client_past_its_shell(initialised_repo: Path) -> None:
    sat = sit_as_process(initialised_repo)
    pid, _, started = hook_episode(initialised_repo, "cc-one")["client"].partition("@")
    assert int(pid) == sat["pid"]  # the client program, not the `sh -c` it ran the hook through
    assert started.isdigit() and int(started) > 0


def test_detach_lets_go_of_a_hook_episode_and_closes_nothing(initialised_repo: Path) -> None:
    answers = sit(initialised_repo, steps="start detach")
    detached = structured(answers[2])
    assert "closes it" in detached["hooks"] and "closed nothing" in detached["hooks"]
    assert detached["episode"]["provider"] == "claude-code"
    assert hook_episode(initialised_repo, "cc-one")["session_id"] == detached["episode"]["session_id"]
    assert records(initialised_repo) == {}  # still open: the client's own end closes it


def test_a_client_whose_hooks_are_wired_but_ran_none_is_told_so_and_gets_no_episode(initialised_repo: Path) -> None:
    install_claude_hooks(initialised_repo)
    answers = sit(initialised_repo, steps="")
    result = structured(answers[1])
    assert "episode" not in result
    assert "through its hooks" in result["hooks"] and "capture status" in result["hooks"]
    assert open_files(initialised_repo) == {}


def test_two_open_hook_episodes_of_the_attaching_process_are_named_and_neither_is_taken(initialised_repo: Path
                                                                                        ) -> None:
    """Two conversations open in the one client process (Cline after `/clear`): which one this sitting is cannot
    be told, so the attach holds neither, opens none, and says both are open (it used to say none was)."""
    install_claude_hooks(initialised_repo)
    result = structured(sit(initialised_repo, steps="start twice")[1])
    ids = sorted(o["session_id"] for o in open_files(initialised_repo).values())
    assert "episode" not in result and len(ids) == 2
    assert "2 hook episodes" in result["hooks"] and all(i in result["hooks"] for i in ids), result["hooks"]
    assert "no hook episode is open" not in result["hooks"]
    assert sorted(o["provider"] for o in open_files(initialised_repo).values()) == ["claude-code", "claude-code"]


def test_a_client_without_hooks_here_still_gets_its_connection_episode(initialised_repo: Path) -> None:
    answers = sit(initialised_repo, steps="", client_name="claude-code")  # its hooks are not wired here
    result = structured(answers[1])
    assert result["episode"]["provider"] == "generic" and "hooks" not in result
    assert [o["provider"] for o in open_files(initialised_repo).values()] == ["generic"]


def test_another_clients_hook_episode_is_never_taken_for_this_sitting(initialised_repo: Path) -> None:
    """An open hook episode of another process (started a moment ago, so nearness in time would pick it)."""
    done = subprocess.run([str(MAJORDOMUS), "capture", "session", "--provider", "claude-code", "--event", "start"],
                          cwd=initialised_repo, input=b'{"session_id": "someone-else"}', capture_output=True)
    assert done.returncode == 0
    result = structured(sit(initialised_repo, steps="", client_name="some-editor")[1])
    assert result["episode"]["provider"] == "generic"
    assert sorted(o["provider"] for o in open_files(initialised_repo).values()) == ["claude-code", "generic"]


def test_a_process_running_hooks_and_another_mcp_client_gets_that_client_its_own_episode(initialised_repo: Path
                                                                                         ) -> None:
    """A harness or an editor that runs a hook sitting and, from the same process, an MCP client that names itself
    otherwise: the process alone is not evidence enough, so the MCP client's attach opens its own episode."""
    result = structured(sit(initialised_repo, client_name="some-editor")[1])
    assert result["episode"]["provider"] == "generic" and "hooks" not in result
    assert sorted(o["provider"] for o in open_files(initialised_repo).values()) == ["claude-code", "generic"]


def test_a_bridged_client_is_recognised_through_the_shared_server(initialised_repo: Path) -> None:
    """The first server is another client's; this sitting's server bridges to it and names its client."""
    with McpProcess(initialised_repo, "--http-port", "0") as first:
        first.url()
        first.request(initialize("first-client"))
        result = structured(sit(initialised_repo)[1])
        assert result["episode"]["session_id"] == hook_episode(initialised_repo, "cc-one")["session_id"]
        assert [o["provider"] for o in open_files(initialised_repo).values()] == ["claude-code"]


@pytest.mark.parametrize("header", ["12@", "@34", "1x@2", "1@2@3", "9" * 30 + "@" + "9" * 30])
def test_a_malformed_client_header_is_refused_with_a_sentence(initialised_repo: Path, header: str) -> None:
    with McpProcess(initialised_repo, "--http-port", "0") as server:
        url = server.url()
        response = httpx.post(f"{url}/mcp", json=initialize("bridge"), timeout=10,
                              headers={**auth(initialised_repo), "X-Majordomus-Bridge": "1",
                                       "X-Majordomus-Client": header, "Accept": "application/json"})
        assert response.status_code == 400
        assert "X-Majordomus-Client" in response.json()["error"]["message"]


def test_the_attach_tool_of_an_http_peer_names_no_process(initialised_repo: Path) -> None:
    """Over plain HTTP there is no spawning process: a hook client's name alone, with no hooks wired, opens its
    connection episode as before."""
    with McpProcess(initialised_repo, "--http-port", "0") as server:
        url = server.url()
        headers = {**auth(initialised_repo), "Accept": "application/json, text/event-stream"}
        opened = httpx.post(f"{url}/mcp", json=initialize("claude-code"), headers=headers, timeout=10)
        headers["Mcp-Session-Id"] = opened.headers["mcp-session-id"]
        headers["MCP-Protocol-Version"] = "2025-06-18"
        answer = httpx.post(f"{url}/mcp", json=call(2, "majordomus_session_attach", {"external_id": "h-1"}),
                            headers=headers, timeout=10).json()
        assert structured(answer)["episode"]["provider"] == "generic"
