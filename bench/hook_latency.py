"""Hook latency: median wall time of the hook commands against `python -c pass` of the same interpreter.

Run: .venv/bin/python bench/hook_latency.py [--rounds N]
Each round runs the bare interpreter and every hook command once, alternated, in a throwaway repository,
so the ratio is measured against a baseline from the same run on the same machine.
Target (issue 2): ≤ 3.0× the bare interpreter; goal 2.0×.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent
MAJORDOMUS = str(BIN / "majordomus") if (BIN / "majordomus").exists() else shutil.which("majordomus")


def timed(argv: list[str], cwd: Path, payload: bytes = b"") -> float:
    t0 = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, input=payload, capture_output=True)
    elapsed = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {done.stderr.decode()}")
    return elapsed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=40)
    args = ap.parse_args()
    if not MAJORDOMUS:
        raise SystemExit("majordomus is not installed in this interpreter's environment; run make demo first")
    # pip byte-compiles a regular install; an editable one (and PYTHONDONTWRITEBYTECODE) would make every
    # run compile our sources again, which is not what a user's hook pays
    import compileall

    import majordomus

    compileall.compile_dir(str(Path(majordomus.__file__).parent), quiet=1)
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        repo.mkdir()
        env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@x.invalid", "GIT_COMMITTER_NAME": "b",
               "GIT_COMMITTER_EMAIL": "b@x.invalid"}
        for cmd in (["git", "init", "-q"], ["git", "commit", "-q", "--allow-empty", "-m", "x"], [MAJORDOMUS, "init"]):
            subprocess.run(cmd, cwd=repo, check=True, capture_output=True, env=env)
        has_prompt = subprocess.run([MAJORDOMUS, "capture", "prompt", "--help"], cwd=repo,
                                    capture_output=True).returncode == 0
        samples: dict[str, list[float]] = {"python -c pass": [], "capture session start": [],
                                           "capture session end": []}
        if has_prompt:
            samples["capture prompt"] = []
        base = [MAJORDOMUS, "capture", "session", "--provider", "claude-code", "--event"]
        for i in range(args.rounds):
            ps = f"bench-{i}"
            samples["python -c pass"].append(timed([sys.executable, "-c", "pass"], repo))
            samples["capture session start"].append(
                timed([*base, "start"], repo, json.dumps({"session_id": ps, "source": "startup"}).encode()))
            if has_prompt:
                body = {"session_id": ps, "prompt_id": f"p-{i}", "hook_event_name": "UserPromptSubmit",
                        "prompt": f"please refactor module {i} and keep the tests green"}
                samples["capture prompt"].append(
                    timed([MAJORDOMUS, "capture", "prompt", "--provider", "claude-code"], repo,
                          json.dumps(body).encode()))
            samples["capture session end"].append(
                timed([*base, "end"], repo, json.dumps({"session_id": ps, "reason": "logout"}).encode()))
    bare = statistics.median(samples["python -c pass"])
    print(f"hook latency, {args.rounds} alternated rounds, {sys.implementation.name} {sys.version.split()[0]}")
    print(f"{'command':<24} {'median ms':>10} {'p90 ms':>8} {'× bare':>7}")
    for name, values in samples.items():
        med = statistics.median(values)
        p90 = sorted(values)[int(len(values) * 0.9) - 1]
        print(f"{name:<24} {med * 1000:>10.1f} {p90 * 1000:>8.1f} {med / bare:>7.2f}")
    if not has_prompt:
        print("(capture prompt is not available in this build; not measured)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
