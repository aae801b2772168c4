"""Soak: hook clients and MCP clients in one repository while the lease holder is killed at random.

    .venv/bin/python bench/soak.py [--seconds 60] [--hook-clients 3] [--mcp-clients 4] [--seed N]

For a bounded time, in a real git repository: hook clients run sittings through the real `majordomus` hooks
(start, prompts, end with a deliberate or a cut-short reason); MCP clients each run a real `majordomus-mcp`
(the first one serves, the others bridge), attach, heartbeat, and end by detaching on purpose or by simply
leaving; a killer sends `kill -9` to whichever process holds the lease, every few seconds (that client
vanishes with it; the bridges elect again and replay).

Then every sitting is checked against what its history implies, and each wrong answer is an error:
- exactly one episode per sitting (one `session.started` line for its provider session or external id);
- a hook sitting ended `logout` is `closed`, one ended `other` with no turn is `interrupted`;
- an MCP sitting that detached is `closed`; one that left or was killed is still open (detached or orphaned,
  never closed) — the grace is the policy's 900 s;
- no half-open episode (an open file or a `session.started` line without its working context);
- the ledger parses, line by line; no lock file is held and no `.git/index.lock` is left; no temp file in the
  tracked layer (`.ai/repo`; a killed server's hidden temps in `.ai/local` are counted, not failed).
Figures: sittings, kills, attach p50/p99 (ms), errors. Exit 1 when there is an error.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import random
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

BIN = Path(sys.executable).parent
MAJORDOMUS, MCP = str(BIN / "majordomus"), str(BIN / "majordomus-mcp")
GIT_ENV = {"GIT_AUTHOR_NAME": "soak", "GIT_AUTHOR_EMAIL": "soak@x.invalid", "GIT_COMMITTER_NAME": "soak",
           "GIT_COMMITTER_EMAIL": "soak@x.invalid"}


@dataclass
class Sitting:
    kind: str  # hook | mcp
    key: str  # the provider session (hook) or the external id (mcp)
    expect: str  # closed | interrupted | open
    note: str = ""


@dataclass
class Run:
    repo: Path
    stop_at: float
    rng: random.Random
    sittings: list[Sitting] = field(default_factory=list)
    attach_ms: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    kills: int = 0
    private_temps: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def error(self, text: str) -> None:
        with self.lock:
            self.errors.append(text)

    def add(self, sitting: Sitting) -> None:
        with self.lock:
            self.sittings.append(sitting)


def make_repo(root: Path) -> Path:
    repo = root / "repo"
    repo.mkdir()
    env = {**os.environ, **GIT_ENV}
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True, env=env)
    (repo / "README.md").write_text("soak\n")
    subprocess.run(["git", "-C", str(repo), "add", "."], check=True, env=env)
    subprocess.run(["git", "-C", str(repo), "commit", "-q", "-m", "init"], check=True, env=env)
    subprocess.run([MAJORDOMUS, "init"], cwd=repo, check=True, capture_output=True)
    return repo


def hook(run: Run, args: list[str], payload: dict[str, str]) -> None:
    done = subprocess.run([MAJORDOMUS, *args], cwd=run.repo, input=json.dumps(payload).encode(),
                          capture_output=True, timeout=60)
    if done.returncode != 0:
        run.error(f"{' '.join(args)} exited {done.returncode}: {done.stderr.decode()[-200:]}")


def hook_client(run: Run, n: int) -> None:
    k = 0
    while time.monotonic() < run.stop_at:
        ps, k = f"hook-{n}-{k}", k + 1
        reason = run.rng.choice(["logout", "other"])
        hook(run, ["capture", "session", "--provider", "claude-code", "--event", "start"], {"session_id": ps})
        for i in range(run.rng.randint(1, 3)):
            hook(run, ["capture", "prompt", "--provider", "claude-code"], {"session_id": ps, "prompt": f"p{i}"})
        hook(run, ["capture", "session", "--provider", "claude-code", "--event", "end"],
             {"session_id": ps, "reason": reason})
        run.add(Sitting("hook", ps, "closed" if reason == "logout" else "interrupted"))


class Stdio:
    """One `majordomus-mcp` and its client's side of stdio."""

    def __init__(self, repo: Path, log: Path | None = None) -> None:
        err = open(log, "wb") if log is not None else subprocess.DEVNULL  # noqa: SIM115 - the child owns it
        self.proc = subprocess.Popen([MCP, "--http-port", "0"], cwd=repo, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=err)
        self.buffer = b""

    def ask(self, message: dict[str, object], timeout: float = 30) -> dict[str, object] | None:
        """The answer to a request; None when the server process is gone (killed as the lease holder)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write(json.dumps(message).encode() + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            while b"\n" in self.buffer:
                line, self.buffer = self.buffer.split(b"\n", 1)
                frame = json.loads(line)
                if frame.get("id") == message.get("id"):
                    return frame  # type: ignore[no-any-return]
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.5)
            if ready:
                chunk = os.read(self.proc.stdout.fileno(), 65536)
                if not chunk:
                    return None
                self.buffer += chunk
        raise TimeoutError(f"no answer to {message.get('method')} in {timeout:.0f} s")

    def close(self) -> None:
        if self.proc.stdin is not None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def tool(request_id: int, name: str, arguments: dict[str, str] | None = None) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
            "params": {"name": name, "arguments": arguments or {}}}


def ok(frame: dict[str, object] | None) -> bool:
    result = frame.get("result") if frame else None
    return isinstance(result, dict) and result.get("isError") is False


def mcp_client(run: Run, n: int) -> None:
    k = 0
    while time.monotonic() < run.stop_at:
        ext, k = f"mcp-{n}-{k}", k + 1
        logs = os.environ.get("SOAK_LOGS")
        client = Stdio(run.repo, Path(logs) / f"{ext}.log" if logs else None)
        killed = False
        try:
            hello = {"protocolVersion": "2025-06-18", "capabilities": {},
                     "clientInfo": {"name": f"soak-{n}", "version": "0"}}
            init = client.ask({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello})
            if init is None:
                run.add(Sitting("mcp", ext, "none", "killed before it attached"))
                continue
            started = time.perf_counter()
            answer = client.ask(tool(2, "majordomus_session_attach", {"external_id": ext}))
            if answer is None:  # killed during its attach: it may or may not have opened
                run.add(Sitting("mcp", ext, "open-or-none", "killed while attaching"))
                continue
            run.attach_ms.append((time.perf_counter() - started) * 1000)
            if not ok(answer):
                run.error(f"attach of {ext} failed: {str(answer)[:200]}")
                continue
            for i in range(run.rng.randint(1, 4)):
                time.sleep(run.rng.uniform(0.05, 0.4))
                if client.ask(tool(10 + i, "majordomus_episodes")) is None:
                    killed = True
                    break
            if killed:
                run.add(Sitting("mcp", ext, "open", "its server was killed"))
                continue
            if run.rng.random() < 0.6:
                answer = client.ask(tool(99, "majordomus_session_detach"))
                if answer is None:  # killed around the detach: closed or still open, never two episodes
                    run.add(Sitting("mcp", ext, "closed-or-open", "killed while detaching"))
                elif ok(answer):
                    run.add(Sitting("mcp", ext, "closed"))
                else:
                    run.error(f"detach of {ext} failed: {str(answer)[:200]}")
            else:
                run.add(Sitting("mcp", ext, "open", "left without detaching"))
        finally:
            client.close()


def guarded(client: Callable[[Run, int], None], run: Run, n: int) -> None:
    """A client whose thread dies of an exception (a request its server never answered, say) is an error, never a
    traceback beside a count of 0."""
    try:
        client(run, n)
    except Exception as exc:  # noqa: BLE001 - counted, not raised: the figure is the error count
        run.error(f"{client.__name__} {n} stopped: {type(exc).__name__}: {exc}")


def killer(run: Run, every: float) -> None:
    lease = run.repo / ".ai/local/state/mcp/server.json"
    while time.monotonic() < run.stop_at - 1.0:
        time.sleep(run.rng.uniform(every / 2, every * 1.5))
        try:
            pid = json.loads(lease.read_text()).get("pid")
        except (OSError, ValueError):
            continue
        if isinstance(pid, int) and pid > 1:
            try:
                os.kill(pid, signal.SIGKILL)
                with run.lock:
                    run.kills += 1
            except ProcessLookupError:
                pass


def ledger_lines(repo: Path, run: Run) -> list[dict[str, object]]:
    lines = []
    for i, line in enumerate((repo / ".ai/local/state/ledger.jsonl").read_text().splitlines()):
        try:
            lines.append(json.loads(line))
        except ValueError:
            run.error(f"ledger line {i + 1} does not parse: {line[:120]!r}")
    return lines


def front(path: Path) -> dict[str, str]:
    text = path.read_text()
    fields = {}
    for line in text[4: text.index("\n---", 4)].splitlines():
        key, _, value = line.partition(": ")
        fields[key] = value.strip().strip('"')
    return fields


def check(run: Run) -> None:
    repo = run.repo
    ledger = ledger_lines(repo, run)
    started: dict[str, list[str]] = {}
    for line in ledger:
        if line.get("event") == "session.started":
            started.setdefault(str(line.get("provider_session")), []).append(str(line.get("session")))
    records = {f["session_id"]: f for f in (front(p) for p in (repo / ".ai/repo/sessions").glob("2*.md"))}
    opened = {}
    for path in (repo / ".ai/local/state/sessions-open").glob("*.yaml"):
        text = path.read_text()
        sid = next((ln.split(": ", 1)[1].strip('"') for ln in text.splitlines() if ln.startswith("session_id:")), "")
        opened[sid] = text
    contexts = {p.name.split("--", 1)[1][:-3] for p in (repo / ".ai/local/session-contexts").glob("*.md")}
    for sitting in run.sittings:
        episodes = started.get(sitting.key, [])
        if sitting.expect in ("none", "open-or-none") and not episodes:
            continue
        if len(episodes) != 1:
            run.error(f"{sitting.kind} sitting {sitting.key} ({sitting.note or sitting.expect}) has "
                      f"{len(episodes)} episodes")
            continue
        sid = episodes[0]
        if sid not in contexts:
            run.error(f"episode {sid} of {sitting.key} is half-open: no working context")
        outcome = records[sid]["outcome"] if sid in records else ("open" if sid in opened else "missing")
        allowed = {"closed": {"closed"}, "interrupted": {"interrupted"}, "open": {"open"},
                   "open-or-none": {"open"}, "closed-or-open": {"closed", "open"}, "none": set()}[sitting.expect]
        if outcome not in allowed:
            run.error(f"{sitting.kind} sitting {sitting.key} ({sitting.note or sitting.expect}) is {outcome}")
    for sid in opened:
        if not any(sid in ids for ids in started.values()):
            run.error(f"open episode {sid} has no session.started line")
    # a record's temp in the tracked layer would be committed by `git add`: an error; a killed server's temp in the
    # private layer is not a record (every reader skips hidden names) and is counted, not failed
    for path in list((repo / ".ai/repo").rglob("*.tmp")) + list((repo / ".git").glob("*.lock")):
        run.error(f"left behind: {path.relative_to(repo)}")
    run.private_temps = len(list((repo / ".ai/local").rglob(".*.tmp")))
    for path in (repo / ".ai/local/state/locks").glob("*"):
        with open(path, "rb") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                run.error(f"lock still held: {path.name}")


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--hook-clients", type=int, default=3)
    parser.add_argument("--mcp-clients", type=int, default=4)
    parser.add_argument("--kill-every", type=float, default=3.0)
    parser.add_argument("--seed", type=int, default=None)
    opts = parser.parse_args()
    seed = opts.seed if opts.seed is not None else random.randrange(1 << 30)
    with tempfile.TemporaryDirectory() as tmp:
        run = Run(make_repo(Path(tmp)), time.monotonic() + opts.seconds, random.Random(seed))
        threads = [threading.Thread(target=guarded, args=(hook_client, run, n)) for n in range(opts.hook_clients)]
        threads += [threading.Thread(target=guarded, args=(mcp_client, run, n)) for n in range(opts.mcp_clients)]
        threads.append(threading.Thread(target=killer, args=(run, opts.kill_every)))
        began = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        took = time.monotonic() - began
        check(run)
        if os.environ.get("SOAK_KEEP"):
            import shutil
            shutil.copytree(run.repo, os.environ["SOAK_KEEP"], dirs_exist_ok=True)
        hooks = sum(1 for s in run.sittings if s.kind == "hook")
        print(f"soak: {took:.0f} s, seed {seed}, load {os.getloadavg()[0]:.2f}: {hooks} hook sittings, "
              f"{len(run.sittings) - hooks} MCP sittings, {run.kills} lease holders killed")
        if run.attach_ms:
            print(f"  attach p50 {statistics.median(run.attach_ms):.0f} ms, p99 {pct(run.attach_ms, 0.99):.0f} ms "
                  f"({len(run.attach_ms)} attaches)")
        print(f"  temp files a kill left in .ai/local (hidden, read by nothing): {run.private_temps}")
        print(f"  errors {len(run.errors)}")
        for line in run.errors[:30]:
            print(f"    {line}")
        return 1 if run.errors else 0


if __name__ == "__main__":
    sys.exit(main())
