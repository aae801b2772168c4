"""How long `capture session end` takes on a repository with 100k tracked files, against baselines in the same run.

    .venv/bin/python bench/end_big_repo.py [--quick] [--files N] [--rounds N]

The big repository is built once into a cache directory (~/.cache/majordomus-bench/, or $XDG_CACHE_HOME):
`git init`, the files written straight from Python, one `git add` and one commit, then the index refreshed so a
status does not rehash every file (the hook runs git with GIT_OPTIONAL_LOCKS=0 and never refreshes it itself).
Each round copies nothing: it changes one tracked file, runs a real `capture session --event start`, then
times a real `--event end`, and restores the file. Alternated in the same rounds, the baselines: a bare
`git status --porcelain` on the big repository (what git alone costs) and the same end on a small repository.
Targets: end median <= 300 ms, p99 <= 800 ms, no `.git/index.lock` left, a record that lacks
a field or cuts a list without marking it counted as an error.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent
MAJORDOMUS = str(BIN / "majordomus")
ENV = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@x", "GIT_COMMITTER_NAME": "b",
       "GIT_COMMITTER_EMAIL": "b@x"}
FIELDS = ("session_id:", "closed_at:", "outcome:", "branch:", "head:", "working_tree:", "changed_files:",
          "commits:")


def git(repo: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, env=ENV, check=False, timeout=600)


def build(where: Path, files: int) -> Path:
    repo = where / f"big-{files}"
    if (repo / ".built").exists():
        return repo
    if repo.exists():
        subprocess.run(["rm", "-rf", str(repo)], check=True)
    repo.mkdir(parents=True)
    began = time.perf_counter()
    git(repo, "init", "-q", "-b", "main")
    for i in range(files):
        d = repo / "src" / f"d{i // 100:04d}"
        if i % 100 == 0:
            d.mkdir(parents=True)
        (d / f"f{i:06d}.txt").write_bytes(b"line %d\n" % i)
    assert git(repo, "add", "-A").returncode == 0
    assert git(repo, "commit", "-q", "-m", "big").returncode == 0
    time.sleep(1.1)  # past the racy-git second, so the refreshed index trusts every file's stat
    git(repo, "update-index", "--refresh")
    subprocess.run([MAJORDOMUS, "init"], cwd=repo, capture_output=True, check=True)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "majordomus init")
    git(repo, "update-index", "--refresh")
    (repo / ".built").write_text("")
    (repo / ".git/info/exclude").write_text(".built\n")
    print(f"built {files} files in {time.perf_counter() - began:.1f} s at {repo}", file=sys.stderr)
    return repo


def small(where: Path) -> Path:
    repo = where / "small"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "README.md").write_text("x\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "x")
    subprocess.run([MAJORDOMUS, "init"], cwd=repo, capture_output=True, check=True)
    return repo


def hook(repo: Path, event: str, sid: str) -> subprocess.CompletedProcess[bytes]:
    payload = {"session_id": sid, "source": "startup"} if event == "start" else {"session_id": sid, "reason": "other"}
    return subprocess.run([MAJORDOMUS, "capture", "session", "--provider", "claude-code", "--event", event],
                          cwd=repo, input=json.dumps(payload).encode(), capture_output=True, env=ENV, check=False,
                          timeout=60)


def end_round(repo: Path, sid: str, touched: Path, seen: set[Path]) -> tuple[float, bool, bool]:
    """(seconds of the end, record right, a list marked truncated)."""
    original = touched.read_bytes()
    assert hook(repo, "start", sid).returncode == 0
    touched.write_bytes(original + b"changed\n")
    began = time.perf_counter()
    done = hook(repo, "end", sid)
    took = time.perf_counter() - began
    touched.write_bytes(original)
    new = [p for p in (repo / ".ai/repo/sessions").glob("*.md") if p.name != "README.md" and p not in seen]
    seen.update(new)
    if done.returncode != 0 or b"episode closed" not in done.stdout + done.stderr or len(new) != 1:
        return took, False, False
    text = new[0].read_text()
    new[0].unlink()  # the record is checked; a thousand of them would slow the next status
    ok = all(f in text for f in FIELDS)
    marked = "truncated:" in text
    # the change is there, or the list says it is not complete
    rel = touched.relative_to(repo).as_posix()
    ok = ok and (rel in text or "changed_files" in text.split("truncated:")[-1])
    # a clean-looking record of a dirty tree without a mark is wrong
    ok = ok and ('working_tree: "dirty"' in text or marked)
    return took, ok, marked


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="10 rounds (a smoke run)")
    ap.add_argument("--files", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=0)
    args = ap.parse_args()
    rounds = args.rounds or (10 if args.quick else 40)
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "majordomus-bench"
    big = build(cache, args.files)
    touched = big / "src" / "d0000" / "f000000.txt"
    times: dict[str, list[float]] = {"status": [], "small": [], "big": []}
    errors = marked = 0
    seen: set[Path] = set()
    with tempfile.TemporaryDirectory() as tmp:
        sm = small(Path(tmp))
        sm_touched = sm / "README.md"
        for n in range(rounds):  # alternated: drift in the machine's load falls on all three alike
            began = time.perf_counter()
            git(big, "status", "--porcelain")
            times["status"].append(time.perf_counter() - began)
            took, ok, _ = end_round(sm, f"small-{n}", sm_touched, seen)
            times["small"].append(took)
            errors += 0 if ok else 1
            took, ok, cut = end_round(big, f"big-{n}-{os.getpid()}", touched, seen)
            times["big"].append(took)
            errors += 0 if ok else 1
            marked += cut
    lock_left = (big / ".git/index.lock").exists()
    base = statistics.median(times["status"])
    print(f"session end on {args.files} tracked files ({rounds} alternated rounds)")
    for label, key in (("git status --porcelain (bare)", "status"), ("end, small repository", "small"),
                       ("end, big repository", "big")):
        m = statistics.median(times[key])
        print(f"  {label:<32} median {m * 1000:7.1f} ms  p99 {pct(times[key], .99) * 1000:7.1f} ms  "
              f"ratio {m / base:4.2f}x bare status")
    m, p99 = statistics.median(times["big"]), pct(times["big"], .99)
    print(f"  records marked truncated: {marked}/{rounds}; errors: {errors}; index.lock left: {lock_left}")
    for name, ok in ((f"end median {m * 1000:.0f} ms <= 300 ms", m <= 0.3),
                     (f"end p99 {p99 * 1000:.0f} ms <= 800 ms", p99 <= 0.8),
                     ("no index.lock left", not lock_left), (f"errors {errors} == 0", errors == 0)):
        print(f"  {'met ' if ok else 'MISS'}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
