"""What reading the usage of ended episodes costs, as figures a person reads (no asserts).

10,000 ended episodes (2,500 of each client), each with its client's own record where the client writes it: a
copy of that client's real record (tests/usage/samples/, written by the pinned clients offline) under a session
id of its own, with 40 KB more of conversation (tool output, text) on lines that carry no usage, as real
transcripts do. Then, each three times, the best run:
- the baseline: open every record, read it line by line and parse every line (`json.loads`): a bare read+parse;
- majordomus's first reading (`majordomus.usage.episode.usages`, no count kept yet): finding each record, reading
  it, counting the episode's window, keeping the count under `.ai/local/state/usage/`;
- the next readings, which find the counts kept (a file's size and time unchanged);
- `majordomus --json episodes` over the same 10,000 records, through the real executable.
Every episode's count is checked against the sample's known sums: a wrong one is an error, never a success.

    .venv/bin/python bench/usage.py [--episodes N]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from majordomus.layout import Layout
from majordomus.usage import episode as usage
from majordomus.usage.tally import Tokens

SAMPLES = Path(__file__).resolve().parents[1] / "tests" / "usage" / "samples"
MAJORDOMUS = Path(sys.executable).parent / "majordomus"
# client: (sample, its session id, where a copy goes, the provider, the sums it holds)
CLIENTS = {
    "claude-code": ("030e6de0-c4eb-4d29-bcbc-a702acf6a632", ".claude/projects/-work-repo/{s}.jsonl",
                    Tokens(3006, 66, 906, 126)),
    "codex": ("01a252dc-20bd-7b43-b53f-e4d1b84558ec",
              ".codex/sessions/2026/12/07/rollout-2026-12-07T23-34-47-{s}.jsonl", Tokens(2100, 66, 906, 0)),
    "gemini": ("7c0897d1-e04e-43b6-b9ca-b1dc2848b042", ".gemini/tmp/repo/chats/session-2026-12-07T23-35-{s8}.jsonl",
               Tokens(2100, 95, 910, 0)),
    "copilot": ("0a5d6913-f8ab-4cbf-b661-a946542c31e7", ".copilot/session-state/{s}/events.jsonl",
                Tokens(2100, 66, 906, 0)),
}
STARTED, CLOSED = "2026-12-07T23:30:00Z", "2026-12-07T23:40:00Z"  # every sample's two sittings inside


@dataclass(frozen=True)
class Ended:
    id: str
    provider: str
    started_at: str
    closed_at: str
    provider_session: str | None


def padding(client: str) -> str:
    """40 KB of conversation without usage, in the client's own shape (a tool's output)."""
    text = "output of a tool the agent ran, line after line " * 80
    line = {"claude-code": {"type": "user", "timestamp": "2026-12-07T23:34:40.000Z",
                            "message": {"role": "user", "content": [{"type": "tool_result", "content": text}]}},
            "codex": {"timestamp": "2026-12-07T23:34:48.400Z", "type": "response_item",
                      "payload": {"type": "function_call_output", "output": text}},
            "gemini": {"id": "pad", "timestamp": "2026-12-07T23:35:07.100Z", "type": "info", "content": text},
            "copilot": {"type": "tool.execution_complete", "timestamp": "2026-12-07T23:35:24.000Z",
                        "data": {"result": text}}}[client]
    return (json.dumps(line) + "\n") * 10


def build(root: Path, n: int) -> tuple[Layout, list[Ended], dict[str, Tokens], list[Path]]:
    repo, home = root / "repo", root / "home"
    (repo / ".ai/local/state").mkdir(parents=True)
    (repo / ".ai/local/session-contexts").mkdir(parents=True)
    (repo / ".ai/repo/sessions").mkdir(parents=True)
    (repo / ".ai/repo/policy.yaml").write_text("prompts:\n  retention_max_days: 90\n")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    episodes, expected, files = [], {}, []
    texts = {c: (SAMPLES / f"{c}.jsonl").read_text() for c in CLIENTS}
    for k in range(n):
        client = list(CLIENTS)[k % 4]
        sample_session, where, sums = CLIENTS[client]
        session = f"{k:08x}-{sample_session[9:]}"
        eid = f"s-20261207233000-{k:04x}" if k < 65536 else f"s-2026120723{k:010d}"
        path = home / where.format(s=session, s8=session[:8])
        path.parent.mkdir(parents=True, exist_ok=True)
        body = texts[client].replace(sample_session, session)
        lines = body.splitlines(keepends=True)
        path.write_text(lines[0] + padding(client) + "".join(lines[1:]))
        files.append(path)
        (repo / ".ai/local/session-contexts" / f"20261207T233000Z--{eid}.md").write_text(
            f'---\nsession_id: "{eid}"\nopened_at: "{STARTED}"\nprovider: "{client}"\n'
            f'provider_session: "{session}"\n---\n\n## Close\nclosed_at: "{CLOSED}"\n')
        (repo / ".ai/repo/sessions" / f"20261207T234000Z--{eid}--main--0000000--{k:016x}.md").write_text(
            f'---\nschema: "session/v1"\nkind: "session"\nsession_id: "{eid}"\nprovider: "{client}"\n'
            f'started_at: "{STARTED}"\nclosed_at: "{CLOSED}"\noutcome: "closed"\nend_reason: "other"\n'
            f'branch: "main"\n---\n')
        episodes.append(Ended(eid, client, STARTED, CLOSED, None))
        expected[eid] = sums
    return Layout(repo), episodes, expected, files


def bare(files: list[Path]) -> float:
    start = time.perf_counter()
    for path in files:
        with path.open("rb") as handle:
            for line in handle:
                json.loads(line)
    return time.perf_counter() - start


def ours(layout: Layout, episodes: list[Ended], env: dict[str, str], expected: dict[str, Tokens]
         ) -> tuple[float, int]:
    start = time.perf_counter()
    found = usage.usages(layout, episodes, env)
    took = time.perf_counter() - start
    wrong = sum(1 for e in episodes if found[e.id].state != "counted" or found[e.id].tokens != expected[e.id])
    return took, wrong


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--episodes", type=int, default=10_000)
    args = p.parse_args()
    root = Path(tempfile.mkdtemp(prefix="mj-usage-bench-"))
    errors = 0
    try:
        layout, episodes, expected, files = build(root, args.episodes)
        env = {**os.environ, "HOME": str(root / "home")}
        for name in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "GEMINI_CLI_HOME", "COPILOT_HOME"):
            env.pop(name, None)
        size = sum(f.stat().st_size for f in files)
        print(f"{len(episodes):,} ended episodes, {size / 1e6:.0f} MB of client records "
              f"({size / len(files) / 1000:.0f} KB each)")
        base = min(bare(files) for _ in range(3))
        firsts, kept = [], []
        for _ in range(3):
            shutil.rmtree(layout.state / "usage", ignore_errors=True)
            took, wrong = ours(layout, episodes, env, expected)
            firsts.append(took)
            errors += wrong
            took, wrong = ours(layout, episodes, env, expected)
            kept.append(took)
            errors += wrong
        print(f"  bare read+parse of every line     {base:7.2f} s   {base / len(files) * 1e3:6.3f} ms an episode")
        print(f"  first reading (counts made, kept) {min(firsts):7.2f} s   {min(firsts) / base:5.2f}x the bare "
              "read+parse (target <= 2.0x)")
        print(f"  next readings (counts kept)       {min(kept):7.2f} s   {min(kept) / base:5.2f}x")
        start = time.perf_counter()
        done = subprocess.run([str(MAJORDOMUS), "--json", "episodes"], cwd=layout.root, env=env,
                              capture_output=True, text=True, timeout=600)
        took = time.perf_counter() - start
        listed = json.loads(done.stdout)["episodes"] if done.returncode == 0 else []
        wrong = sum(1 for e in listed if e["usage"]["state"] != "counted"
                    or Tokens(e["usage"]["input_tokens"], e["usage"]["output_tokens"],
                              e["usage"]["cache_read_tokens"], e["usage"]["cache_write_tokens"]) != expected[e["id"]])
        wrong += len(episodes) - len(listed)
        errors += wrong
        print(f"  majordomus --json episodes (kept) {took:7.2f} s   the whole listing, through the executable")
        print(f"errors: {errors} (an episode whose count is not the sample's sums)")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
