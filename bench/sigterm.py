"""What survives a client that SIGKILLs its MCP server right after SIGTERM (Copilot CLI: 3 ms later).

    .venv/bin/python bench/sigterm.py [--rounds N]

Per delay between SIGTERM and SIGKILL (0 ms: the baseline, a bare kill -9 after the signal; 3 ms: Copilot;
100 ms: Claude Code's SIGINT-to-SIGTERM gap), in real repositories and real `majordomus-mcp` processes:
how often the attached episode's open file says `detached_at` with no `held_by`, and how often the lease is
gone. A round where either is missing counts as a failure: that is what doctor would report afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "bench", "version": "0"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def make_repo(root: Path) -> Path:
    repo = root / "repo"
    repo.mkdir()
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@x.invalid", "GIT_COMMITTER_NAME": "b",
           "GIT_COMMITTER_EMAIL": "b@x.invalid"}
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True, env=env)
    subprocess.run(["git", "-C", str(repo), "commit", "-q", "--allow-empty", "-m", "init"], check=True, env=env)
    subprocess.run([str(BIN / "majordomus"), "init"], cwd=repo, check=True, capture_output=True)
    return repo


def read_answer(proc: subprocess.Popen[bytes], want: int, timeout: float = 20) -> dict[str, object]:
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    buffer = b""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.5)
        if not ready:
            continue
        chunk = os.read(proc.stdout.fileno(), 65536)
        if not chunk:
            break
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            frame = json.loads(line)
            if frame.get("id") == want:
                return frame  # type: ignore[no-any-return]
    raise RuntimeError(f"no answer to request {want}")


def one_round(repo: Path, delay: float, n: int) -> tuple[bool, bool]:
    external = f"bench-{n}"
    proc = subprocess.Popen([str(BIN / "majordomus-mcp"), "--http-port", "0"], cwd=repo, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdin is not None
    attach = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
              "params": {"name": "majordomus_session_attach", "arguments": {"external_id": external}}}
    for message in (INIT, INITIALIZED, attach):
        proc.stdin.write(json.dumps(message).encode() + b"\n")
    proc.stdin.flush()
    read_answer(proc, 2)
    os.kill(proc.pid, signal.SIGTERM)
    time.sleep(delay)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    text = (repo / ".ai/local/state/sessions-open" / f"{external}.yaml").read_text()
    detached = "detached_at: \"" in text and "held_by: null" in text
    lease_gone = not (repo / ".ai/local/state/mcp/server.json").exists()
    (repo / ".ai/local/state/mcp/server.json").unlink(missing_ok=True)  # the next round starts clean
    return detached, lease_gone


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=10)
    rounds = parser.parse_args().rounds
    print(f"SIGTERM then SIGKILL, {rounds} rounds per delay (load {os.getloadavg()[0]:.2f})")
    with tempfile.TemporaryDirectory() as tmp:
        repo = make_repo(Path(tmp))
        baseline = None
        for label, delay in (("0 ms (baseline)", 0.0), ("3 ms (Copilot)", 0.003), ("100 ms (Claude Code)", 0.1)):
            results = [one_round(repo, delay, i + int(delay * 1e6)) for i in range(rounds)]
            both = sum(1 for d, lease in results if d and lease)
            detached = sum(1 for d, _ in results if d)
            gone = sum(1 for _, lease in results if lease)
            baseline = both if baseline is None else baseline
            print(f"  SIGKILL after {label:<22} detached {detached:>3}/{rounds}   lease removed {gone:>3}/{rounds}   "
                  f"both {both:>3}/{rounds}   errors {rounds - both:>3}   (vs baseline {both - baseline:+d})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
