"""Benchmark of the MCP server against the official SDK's `MCPServer`, in the same run, on this machine.

    .venv/bin/python bench/server.py [--quick]

Figures: spawn to the first `initialize` answer (stdio); `tools/call` round trips per second over stdio
and over HTTP; 100 concurrent HTTP peers attaching and heartbeating (p50/p99 latency, errors); resident
memory with 1,000 episodes on the board. Targets (issue 4): first answer <= 0.3x the SDK's, throughput
>= 2x the SDK's, no errors under 100 peers. Every request goes to 127.0.0.1; every loop is bounded.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

BIN = Path(sys.executable).parent
MCP = str(BIN / "majordomus-mcp")
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "bench", "version": "0"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
# The owner's token of our shared server (SPEC §8: every request but /api/v1/live carries it), read from its lease
# by start_ours; sent to the SDK's baseline server too, which ignores it.
AUTH: dict[str, str] = {}

BASELINE = '''
import sys
from mcp.server.mcpserver import MCPServer

app = MCPServer("baseline")

@app.tool()
def peers() -> dict:
    """An equivalent trivial tool: a small structured answer."""
    return {"count": 1, "peers": []}

if sys.argv[1] == "stdio":
    app.run("stdio")
else:
    app.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]), json_response=True)
'''


def line(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj).encode() + b"\n"


def make_repo(where: Path) -> Path:
    repo = where / "repo"
    repo.mkdir()
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@x", "GIT_COMMITTER_NAME": "b",
           "GIT_COMMITTER_EMAIL": "b@x"}
    for args in (["init", "-q", "-b", "main"], ["commit", "-q", "--allow-empty", "-m", "x"]):
        subprocess.run(["git", *args], cwd=repo, check=True, env=env)
    subprocess.run([str(BIN / "majordomus"), "init"], cwd=repo, check=True, capture_output=True)
    return repo


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- stdio -------------------------------------------------------------------------------------------

def spawn_to_first_answer(cmd: list[str], cwd: Path, runs: int) -> float:
    """Median seconds from spawn to the first line of the initialize answer."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL)
        assert proc.stdin and proc.stdout
        proc.stdin.write(line(INIT))
        proc.stdin.flush()
        proc.stdout.readline()
        times.append(time.perf_counter() - start)
        proc.stdin.close()
        proc.wait(timeout=30)
    return statistics.median(times)


def stdio_calls_per_second(cmd: list[str], cwd: Path, tool: str, count: int) -> float:
    proc = subprocess.Popen(cmd, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdin and proc.stdout
    proc.stdin.write(line(INIT) + line(INITIALIZED))
    proc.stdin.flush()
    proc.stdout.readline()
    request = {"jsonrpc": "2.0", "id": 0, "method": "tools/call", "params": {"name": tool, "arguments": {}}}
    start = time.perf_counter()
    for i in range(count):
        request["id"] = i + 2
        proc.stdin.write(line(request))
        proc.stdin.flush()
        answer = json.loads(proc.stdout.readline())
        assert answer["result"]["isError"] is False, answer
    elapsed = time.perf_counter() - start
    proc.stdin.close()
    proc.wait(timeout=30)
    return count / elapsed


# -- HTTP --------------------------------------------------------------------------------------------

class Session:
    """One legacy Streamable-HTTP session over a kept-alive connection."""

    def __init__(self, port: int, path: str = "/mcp") -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.path = path
        self.sid: str | None = None

    def post(self, message: dict[str, Any]) -> tuple[int, Any]:
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                   "MCP-Protocol-Version": "2025-06-18", **AUTH}
        if self.sid:
            headers["Mcp-Session-Id"] = self.sid
        self.conn.request("POST", self.path, body=json.dumps(message).encode(), headers=headers)
        response = self.conn.getresponse()
        body = response.read()
        self.sid = response.getheader("mcp-session-id") or self.sid
        return response.status, json.loads(body) if body else None

    def open(self) -> None:
        status, _ = self.post(INIT)
        assert status == 200, status
        self.post(INITIALIZED)


def http_calls_per_second(port: int, tool: str, count: int) -> float:
    session = Session(port)
    session.open()
    start = time.perf_counter()
    for i in range(count):
        status, answer = session.post({"jsonrpc": "2.0", "id": i + 2, "method": "tools/call",
                                       "params": {"name": tool, "arguments": {}}})
        assert status == 200 and answer["result"]["isError"] is False, answer
    return count / (time.perf_counter() - start)


def _client_share(args: tuple[int, str, int]) -> int:
    port, tool, count = args
    http_calls_per_second(port, tool, count)
    return count


def http_saturated_calls_per_second(port: int, tool: str, count: int, clients: int = 4) -> float:
    """`clients` processes, each its own session, calling at once: what the server can carry, not one
    client's round-trip latency (with one serial client the server idles most of the time)."""
    import multiprocessing

    share = max(1, count // clients)
    with multiprocessing.get_context("fork").Pool(clients) as pool:
        start = time.perf_counter()
        done = sum(pool.map(_client_share, [(port, tool, share)] * clients))
        return done / (time.perf_counter() - start)


def wait_port(port: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listens on {port}")


def start_ours(repo: Path) -> tuple[subprocess.Popen[bytes], int]:
    proc = subprocess.Popen([MCP, "--http-port", "0"], cwd=repo, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    assert proc.stderr
    first = proc.stderr.readline().decode()
    match = re.search(r"http://127\.0\.0\.1:(\d+)", first)
    assert match, first
    lease = json.loads((repo / ".ai/local/state/mcp/server.json").read_text())
    AUTH["Authorization"] = f"Bearer {lease['token']}"
    return proc, int(match.group(1))


def percentiles(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    return ordered[len(ordered) // 2], ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def peers_under_load(port: int, peers: int, beats: int) -> dict[str, Any]:
    """`peers` threads: each opens a session, attaches its own episode, then heartbeats `beats` times."""
    latencies: list[float] = []
    attaches: list[float] = []
    errors = [0]
    lock = threading.Lock()

    def peer(n: int) -> None:
        try:
            session = Session(port)
            session.open()
            for i in range(beats + 1):
                tool, args = (("majordomus_session_attach", {"external_id": f"bench-peer-{n}"}) if i == 0
                              else ("majordomus_episodes", {}))
                start = time.perf_counter()
                status, answer = session.post({"jsonrpc": "2.0", "id": i + 2, "method": "tools/call",
                                               "params": {"name": tool, "arguments": args}})
                took = time.perf_counter() - start
                ok = status == 200 and answer["result"]["isError"] is False
                with lock:
                    (attaches if i == 0 else latencies).append(took)
                    errors[0] += 0 if ok else 1
            session.conn.request("DELETE", "/mcp", headers={"Mcp-Session-Id": session.sid or "", **AUTH})
            session.conn.getresponse().read()
        except Exception:  # noqa: BLE001 - counted, not raised: the figure is the error count
            with lock:
                errors[0] += 1

    threads = [threading.Thread(target=peer, args=(n,)) for n in range(peers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    all_p50, all_p99 = percentiles(latencies + attaches)
    beat_p50, beat_p99 = percentiles(latencies)
    attach_p50, attach_p99 = percentiles(attaches)
    return {"p50_ms": all_p50 * 1000, "p99_ms": all_p99 * 1000, "errors": errors[0],
            "requests": len(latencies) + len(attaches),
            "heartbeat_p50_ms": beat_p50 * 1000, "heartbeat_p99_ms": beat_p99 * 1000,
            "attach_p50_ms": attach_p50 * 1000, "attach_p99_ms": attach_p99 * 1000}


def rss_kib(pid: int) -> int:
    for row in Path(f"/proc/{pid}/status").read_text().splitlines():
        if row.startswith("VmRSS:"):
            return int(row.split()[1])
    return 0


def rss_with_episodes(port: int, pid: int, count: int) -> tuple[int, int]:
    """RSS before and after `count` stateless attaches (each one a real episode through capture)."""
    before = rss_kib(pid)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    for n in range(count):
        meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {}}
        body = {"jsonrpc": "2.0", "id": n, "method": "tools/call",
                "params": {"name": "majordomus_session_attach", "arguments": {"external_id": f"rss-{n}"},
                           "_meta": meta}}
        conn.request("POST", "/mcp", body=json.dumps(body).encode(), headers={
            "Content-Type": "application/json", "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call",
            "Mcp-Name": "majordomus_session_attach", **AUTH})
        answer = json.loads(conn.getresponse().read())
        assert answer["result"]["isError"] is False, answer
    return before, rss_kib(pid)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer iterations (a smoke run)")
    opts = parser.parse_args()
    runs, calls, beats, episodes = (3, 200, 5, 100) if opts.quick else (10, 2000, 20, 1000)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        repo = make_repo(Path(tmp))
        baseline = Path(tmp) / "baseline.py"
        baseline.write_text(BASELINE)
        sdk_stdio = [sys.executable, str(baseline), "stdio"]

        results["first_answer_s"] = {
            "ours_standalone": spawn_to_first_answer([MCP, "--standalone"], repo, runs),
            "ours_shared": spawn_to_first_answer([MCP, "--http-port", "0"], repo, runs),
            "sdk": spawn_to_first_answer(sdk_stdio, repo, runs),
        }
        results["stdio_calls_per_s"] = {
            "ours": stdio_calls_per_second([MCP, "--standalone"], repo, "majordomus_peers", calls),
            "sdk": stdio_calls_per_second(sdk_stdio, repo, "peers", calls),
        }
        ours, port = start_ours(repo)
        sdk_port = free_port()
        sdk = subprocess.Popen([sys.executable, str(baseline), "http", str(sdk_port)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
        try:
            wait_port(sdk_port)
            results["http_calls_per_s"] = {
                "ours": http_calls_per_second(port, "majordomus_peers", calls),
                "sdk": http_calls_per_second(sdk_port, "peers", calls),
            }
            results["http_calls_per_s_4_clients"] = {
                "ours": http_saturated_calls_per_second(port, "majordomus_peers", calls * 2),
                "sdk": http_saturated_calls_per_second(sdk_port, "peers", calls * 2),
            }
            results["peers_100"] = peers_under_load(port, 100, beats)
            before, after = rss_with_episodes(port, ours.pid, episodes)
            results["rss_kib"] = {"before": before, f"with_{episodes}_episodes": after}
        finally:
            sdk.terminate()
            sdk.wait(timeout=10)
            assert ours.stdin
            ours.stdin.close()
            ours.terminate()
            ours.wait(timeout=30)

    first, stdio, http_ = results["first_answer_s"], results["stdio_calls_per_s"], results["http_calls_per_s"]
    results["ratios"] = {
        "first_answer_standalone_vs_sdk": first["ours_standalone"] / first["sdk"],
        "first_answer_shared_vs_sdk": first["ours_shared"] / first["sdk"],
        "stdio_throughput_vs_sdk": stdio["ours"] / stdio["sdk"],
        "http_throughput_vs_sdk": http_["ours"] / http_["sdk"],
        "http_throughput_4_clients_vs_sdk": (results["http_calls_per_s_4_clients"]["ours"]
                                             / results["http_calls_per_s_4_clients"]["sdk"]),
    }
    print(json.dumps(results, indent=2))
    ratios, peers = results["ratios"], results["peers_100"]
    verdicts = [("first answer <= 0.3x SDK (standalone)", ratios["first_answer_standalone_vs_sdk"] <= 0.3),
                ("first answer <= 0.3x SDK (shared)", ratios["first_answer_shared_vs_sdk"] <= 0.3),
                ("stdio throughput >= 2x SDK", ratios["stdio_throughput_vs_sdk"] >= 2),
                ("HTTP throughput >= 2x SDK, one serial client", ratios["http_throughput_vs_sdk"] >= 2),
                ("HTTP throughput >= 2x SDK, four clients at once", ratios["http_throughput_4_clients_vs_sdk"] >= 2),
                ("no errors under 100 peers", peers["errors"] == 0)]
    for name, ok in verdicts:
        print(f"{'met ' if ok else 'MISS'}  {name}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
