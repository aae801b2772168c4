"""Hook latency: median wall time of the hook commands against `python -c pass` of the same interpreter.

Run: .venv/bin/python bench/hook_latency.py [--rounds N] [--build PATH/TO/majordomus ...]
Each round runs the bare interpreter and every hook command once, alternated, in a throwaway repository,
so the ratio is measured against a baseline from the same run on the same machine. With --build (repeatable),
each named `majordomus` executable (for example a regular install of an older commit in its own venv) gets its
own repository and its commands are alternated with the others' in every round, so builds compare fairly.
Targets: `capture prompt` ≤ 2.0× the bare interpreter, `capture session start|end|compact|turn`
≤ 2.2× (on this small repository), on 3.11, 3.12 and 3.13; printed beside each ratio. `--rounds 8` is the
CI-sized report `make test` prints after the suite; a report, never an assertion.
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


def session_events(exe: str, repo: Path) -> tuple[str, ...]:
    """The boundary events this build offers beyond start and end (an older build has no `turn`)."""
    said = subprocess.run([exe, "capture", "session", "--help"], cwd=repo, capture_output=True, text=True)
    return tuple(e for e in ("compact", "turn") if e in said.stdout + said.stderr)


def setup_repo(root: Path, exe: str) -> tuple[Path, bool]:
    repo = root / f"repo-{abs(hash(exe))}"
    repo.mkdir()
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@x.invalid", "GIT_COMMITTER_NAME": "b",
           "GIT_COMMITTER_EMAIL": "b@x.invalid"}
    for cmd in (["git", "init", "-q"], ["git", "commit", "-q", "--allow-empty", "-m", "x"], [exe, "init"]):
        subprocess.run(cmd, cwd=repo, check=True, capture_output=True, env=env)
    has_prompt = subprocess.run([exe, "capture", "prompt", "--help"], cwd=repo, capture_output=True).returncode == 0
    return repo, has_prompt


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--build", action="append", default=[], help="another majordomus executable to alternate with")
    args = ap.parse_args()
    if not MAJORDOMUS:
        raise SystemExit("majordomus is not installed in this interpreter's environment; run make demo first")
    # pip byte-compiles a regular install; an editable one (and PYTHONDONTWRITEBYTECODE) would make every
    # run compile our sources again, which is not what a user's hook pays
    import compileall

    import majordomus

    compileall.compile_dir(str(Path(majordomus.__file__).parent), quiet=1)
    builds = [MAJORDOMUS, *args.build]
    for exe in args.build:
        if not os.access(exe, os.X_OK):
            raise SystemExit(f"--build {exe}: not an executable; give the path of a majordomus script")
    with tempfile.TemporaryDirectory() as tmp:
        repos = {exe: setup_repo(Path(tmp), exe) for exe in builds}
        offered = {exe: session_events(exe, repos[exe][0]) for exe in builds}
        samples: dict[str, list[float]] = {"python -c pass": []}
        label = {exe: ("" if len(builds) == 1 else f" [{i}]") for i, exe in enumerate(builds)}
        for i in range(args.rounds):
            ps = f"bench-{i}"
            samples["python -c pass"].append(timed([sys.executable, "-c", "pass"], Path(tmp)))
            for exe in builds:
                repo, has_prompt = repos[exe]
                base = [exe, "capture", "session", "--provider", "claude-code", "--event"]
                samples.setdefault(f"capture session start{label[exe]}", []).append(
                    timed([*base, "start"], repo, json.dumps({"session_id": ps, "source": "startup"}).encode()))
                if has_prompt:
                    body = {"session_id": ps, "prompt_id": f"p-{i}", "hook_event_name": "UserPromptSubmit",
                            "prompt": f"please refactor module {i} and keep the tests green"}
                    samples.setdefault(f"capture prompt{label[exe]}", []).append(
                        timed([exe, "capture", "prompt", "--provider", "claude-code"], repo,
                              json.dumps(body).encode()))
                for event in offered[exe]:
                    samples.setdefault(f"capture session {event}{label[exe]}", []).append(
                        timed([*base, event], repo, json.dumps({"session_id": ps}).encode()))
                samples.setdefault(f"capture session end{label[exe]}", []).append(
                    timed([*base, "end"], repo, json.dumps({"session_id": ps, "reason": "logout"}).encode()))
    bare = statistics.median(samples["python -c pass"])
    print(f"hook latency, {args.rounds} alternated rounds, {sys.implementation.name} {sys.version.split()[0]}")
    if len(builds) > 1:
        for exe in builds:
            print(f"  build{label[exe]}: {exe}")
    print(f"{'command':<32} {'median ms':>10} {'p90 ms':>8} {'× bare':>7} {'target':>7}")
    for name, values in samples.items():
        med = statistics.median(values)
        p90 = sorted(values)[max(0, int(len(values) * 0.9) - 1)]
        target = "" if name == "python -c pass" else ("≤ 2.0" if name.startswith("capture prompt") else "≤ 2.2")
        print(f"{name:<32} {med * 1000:>10.1f} {p90 * 1000:>8.1f} {med / bare:>7.2f} {target:>7}")
    if any(not has for _, has in repos.values()):
        print("(capture prompt is not available in one build; not measured there)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
