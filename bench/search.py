"""`majordomus search`: index build time, query latency and index size, at 10k and 100k prompt records.

    .venv/bin/python bench/search.py [--sizes 10000,100000] [--rounds 5]

Each archive is written with the product's own writer (`archive.record.dumps`, both renderings beside each
record, and `episodes.store.SessionRecord` for 50 closed episodes), so the directory the index catches up
with is the one a person's archive is. Prompt texts are drawn from a fixed vocabulary with a seeded random
generator; every 1000th prompt carries a word of its own (`needle<i>`), and one word is given to a known set
of prompts, so each query has one right answer: a wrong count or a wrong record is counted as an error.

Figures, per size, against baselines measured in the same run on the same archive:
  build        the first `majordomus search` (no index yet): wall time, and per 1k prompts
  query        `majordomus search` on a caught-up index (the real executable, a process each): median
  catch-up     the same after 10 new records were captured: median
  in-process   Index.search alone (no process start): median
  scan         the baseline: one pass reading every record through archive.record and matching the text
               (what a tool without an index does for every query); ratio scan / query
  python       `python -c pass`: what any process start costs; ratio query / python
  size         index bytes per prompt record
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from majordomus.archive import record as rec
from majordomus.archive.render import render_md, render_yaml
from majordomus.episodes.store import SessionRecord
from majordomus.history import index as search_index
from majordomus.identity import rfc3339, worktree_id
from majordomus.layout import Layout

BIN = Path(sys.executable).parent
MAJORDOMUS = str(BIN / "majordomus")
BASE = datetime(2026, 6, 1, tzinfo=timezone.utc)
EPISODES = 50
VOCABULARY = [f"{a}{b}" for a in ("re", "un", "pre", "de", "in", "ex", "co", "sub", "over", "out")
              for b in ("factor", "name", "test", "build", "parse", "merge", "cache", "index", "route", "query",
                        "render", "store", "lock", "sign", "patch", "fetch", "trace", "bound", "load", "write")]
VOCABULARY += ["the", "and", "please", "module", "function", "error", "explain", "why", "this", "fails"]
KNOWN_WORD = "marmalade"  # given to every 97th prompt
NEEDLE_EVERY = 1000


def git_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@x.invalid", "GIT_COMMITTER_NAME": "b",
           "GIT_COMMITTER_EMAIL": "b@x.invalid"}
    for args in (["init", "-q", "-b", "main"], ["commit", "-q", "--allow-empty", "-m", "first"]):
        subprocess.run(["git", "-C", str(path), *args], check=True, capture_output=True, env=env)
    subprocess.run([MAJORDOMUS, "init"], cwd=path, check=True, capture_output=True)
    return path


def write_file(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, data)
    os.close(fd)


def prompt_text(rng: random.Random, i: int) -> str:
    words = [rng.choice(VOCABULARY) for _ in range(rng.randint(8, 40))]
    if i % 97 == 0:
        words.insert(rng.randint(0, len(words)), KNOWN_WORD)
    if i % NEEDLE_EVERY == 0:
        words.insert(rng.randint(0, len(words)), f"needle{i}")
    return " ".join(words)


def synthesize(repo: Path, count: int, start: int = 0) -> dict[str, set[str]]:
    """`count` prompt records (from number `start`) and, the first time, 50 closed episodes; the answers."""
    layout = Layout(repo)
    here = worktree_id(repo)
    rng = random.Random(start or 11)
    span = 200 * 86400
    if start == 0:
        for n in range(EPISODES):
            opened = BASE + timedelta(seconds=n * span // EPISODES)
            sid = f"s-{opened:%Y%m%d%H%M%S}-{n:04x}"
            record = SessionRecord(session_id=sid, provider="claude-code", started_at=rfc3339(opened),
                                   closed_at=rfc3339(opened + timedelta(seconds=span // EPISODES - 1)),
                                   outcome="closed" if n % 3 else "interrupted", end_reason="other",
                                   repository_id="local:bench", worktree_id=here, branch="main",
                                   start_head="0" * 40, head="0" * 40, start_working_tree="clean",
                                   working_tree="clean", changed_files=(f" M src/mod{n}.py",),
                                   title=f"Session {sid} on main")
            (layout.sessions_dir / f"{opened:%Y%m%dT%H%M%SZ}--{sid}--main--0000000--{n:016x}.md").write_text(
                record.to_text())
    answers: dict[str, set[str]] = {KNOWN_WORD: set()}
    for i in range(start, start + count):
        moment = BASE + timedelta(seconds=(i % 100_000) * span // 100_000, microseconds=0)
        n = (i % 100_000) * EPISODES // 100_000
        sid = f"s-{BASE + timedelta(seconds=n * span // EPISODES):%Y%m%d%H%M%S}-{n:04x}"
        text = prompt_text(rng, i)
        record = rec.PromptRecord.from_members({
            "schema": rec.SCHEMA, "started_at": rfc3339(moment), "provider": "claude-code",
            "event": "UserPromptSubmit", "id": f"id-{i}", "session": f"ps-{n}", "episode": sid,
            "episode_link": "open", "repository_id": "local:bench", "worktree_id": here, "source": None,
            "cwd": str(repo), "branch": "main", "head": "0" * 40, "text": text})
        stem = f"{moment:%Y%m%d%H%M%S}-{rec.slug(text)}-{i}"
        write_file(layout.prompts_dir / f"{stem}.json", rec.dumps(record))
        write_file(layout.prompts_dir / f"{stem}.md", render_md(record, stem).encode())
        write_file(layout.prompts_dir / f"{stem}.yaml", render_yaml(record, stem).encode())
        if i % 97 == 0:
            answers[KNOWN_WORD].add(f"{stem}.json")
        if i % NEEDLE_EVERY == 0:
            answers[f"needle{i}"] = {f"{stem}.json"}
    # make the directory look settled, as an archive between two prompts is
    old = time.time() - 10
    os.utime(layout.prompts_dir, (old, old))
    return answers


def search_cli(repo: Path, query: str) -> tuple[float, set[str]]:
    began = time.perf_counter()
    done = subprocess.run([MAJORDOMUS, "--json", "search", "-n", "100000", query], cwd=repo, capture_output=True)
    elapsed = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(f"search {query!r} failed: {done.stderr.decode()}")
    return elapsed, {r["record"] for r in json.loads(done.stdout)["results"] if r["kind"] == "prompt"}


def scan(repo: Path, word: str) -> tuple[float, set[str]]:
    """The baseline: every record read through the product's reader, its text matched word by word."""
    layout = Layout(repo)
    began = time.perf_counter()
    found = set()
    for name in sorted(os.listdir(layout.prompts_dir)):
        if not rec.is_record_name(name):
            continue
        r = rec.load(layout.prompts_dir / name)
        if r.text is not None and word in r.text.split():
            found.add(name)
    return time.perf_counter() - began, found


def python_start() -> float:
    began = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return time.perf_counter() - began


def run_size(tmp: Path, size: int, rounds: int) -> dict[str, float]:
    repo = git_repo(tmp / f"repo-{size}")
    t0 = time.perf_counter()
    answers = synthesize(repo, size)
    generated = time.perf_counter() - t0
    errors = 0
    needles = sorted(k for k in answers if k.startswith("needle"))
    build, got = search_cli(repo, needles[0])
    errors += got != answers[needles[0]]
    query_t, catch_t, inproc_t, scan_t, py_t = [], [], [], [], []
    for r in range(rounds):
        py_t.append(python_start())
        needle = needles[r % len(needles)]
        t, got = search_cli(repo, needle)
        query_t.append(t)
        errors += got != answers[needle]
        t, got = search_cli(repo, KNOWN_WORD)
        errors += got != answers[KNOWN_WORD]
        t, got = scan(repo, needle)
        scan_t.append(t)
        errors += got != answers[needle]
        idx = search_index.opened(Layout(repo))
        began = time.perf_counter()
        got = {h.name for h in idx.search(needle) if h.kind == "prompt"}
        inproc_t.append(time.perf_counter() - began)
        idx.close()
        errors += got != answers[needle]
    for r in range(rounds):  # 10 new records captured since the last query, then the query catches up
        more = synthesize(repo, 10, start=size + 1000 + r * 10)
        answers[KNOWN_WORD] |= more[KNOWN_WORD]
        t, got = search_cli(repo, KNOWN_WORD)
        catch_t.append(t)
        errors += got != answers[KNOWN_WORD]
    index_bytes = (repo / ".ai/local/state/search.sqlite3").stat().st_size
    figures = {"generated_s": generated, "build_s": build, "query_s": statistics.median(query_t),
               "catch_up_s": statistics.median(catch_t), "in_process_s": statistics.median(inproc_t),
               "scan_s": statistics.median(scan_t), "python_s": statistics.median(py_t),
               "bytes_per_prompt": index_bytes / size, "errors": errors}
    shutil.rmtree(repo)
    return figures


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    # a regular install is byte-compiled; an editable one under PYTHONDONTWRITEBYTECODE would recompile our
    # sources in every process, which no user pays
    import compileall

    import majordomus

    compileall.compile_dir(str(Path(majordomus.__file__).parent), quiet=1)
    with tempfile.TemporaryDirectory(prefix="mj-search-bench-") as tmp:
        results = {size: run_size(Path(tmp), size, args.rounds) for size in sizes}
    print(f"{'prompts':>8} {'build':>8} {'per 1k':>7} {'query':>7} {'catch-up':>8} {'in-proc':>8} {'scan':>8} "
          f"{'scan/query':>10} {'query/python':>12} {'bytes/prompt':>12} {'errors':>6}")
    for size, f in results.items():
        print(f"{size:>8} {f['build_s']:>7.2f}s {f['build_s'] / size * 1000:>6.3f}s {f['query_s'] * 1000:>5.0f}ms "
              f"{f['catch_up_s'] * 1000:>6.0f}ms {f['in_process_s'] * 1000:>6.1f}ms {f['scan_s']:>7.2f}s "
              f"{f['scan_s'] / f['query_s']:>9.1f}× {f['query_s'] / f['python_s']:>11.1f}× "
              f"{f['bytes_per_prompt']:>12.0f} {f['errors']:>6}")
    if len(results) > 1:
        small, large = min(results), max(results)
        print(f"growth {small} → {large} prompts ({large / small:.0f}×): build "
              f"{results[large]['build_s'] / results[small]['build_s']:.1f}×, query "
              f"{results[large]['query_s'] / results[small]['query_s']:.2f}×, scan "
              f"{results[large]['scan_s'] / results[small]['scan_s']:.1f}×")
    if any(f["errors"] for f in results.values()):
        raise SystemExit("wrong results: see the errors column")


if __name__ == "__main__":
    main()
