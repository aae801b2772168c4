"""Hook latency: median wall time of the hook commands `capture install` writes, against `python -c pass` of the same
interpreter, for regular (non-editable) installs made by an old pip and by a current one.

Run: .venv/bin/python bench/hook_latency.py [--rounds N] [--pythons 3.11 3.12 3.13] [--no-old-pip]

For each Python it builds this checkout's wheel once and installs it (`--no-deps`: the hook path is stdlib only) into
two virtualenvs: one with the pip that interpreter's own `venv` brings (pip 23.2.1 on 3.11.7, whose console scripts
start with `import re`) and one with a current pip. Each round then runs, for each install, every Claude Code hook
a sitting fires (start, a plain prompt, a prompt holding a credential, compact, turn, end), each run just after a
bare `python -c pass` of the same interpreter (the baseline: both meet the machine in the same state), the installs
and the forms taking every place in a round in turn. Three forms:
  per-person  the command Claude Code's settings.local.json holds: `python -IS majordomus-hook …` by path;
  shared      the command .codex/hooks.json or .gemini/settings.json hold: the launcher found on PATH, its `#!`
              line read by the shell and its interpreter started `-IS` (pip drops the wheel's flags from that line);
  console     pip's console script `majordomus capture …` (what installs before the launcher wrote), for reference.
The two wired forms run as the very command install writes, through `sh -c` as a client runs it (its `exit 0` left
off, so a failure shows), and the cost of the shell itself (`sh -c 'python -c pass'` less `python -c pass`, printed)
is taken off their figures: what the shell does for the command (the guard, finding the launcher) is counted.
Targets (the per-person and shared forms): plain prompt ≤ 1.8×, prompt holding a credential ≤ 2.5×, session
start/end ≤ 2.0×, compact/turn ≤ 2.2×, and ≤ 2.2× for `beside`: a start while another agent's episode is open in the
worktree (a person running two agents), which first looks for that worktree's stale episodes. Every run is checked:
a non-zero exit, a line in hook-failures.log, or a record missing at the end is an error, and the bench exits 1.
A report, never an assertion on wall clock: `make test` prints a CI-sized run (`--rounds 8`, this interpreter).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from majordomus.clients.hook_command import local_command, shared_command  # noqa: E402 - after the path

ROOT = Path(__file__).resolve().parents[1]
TARGETS = {"start": 2.0, "prompt": 1.8, "credential": 2.5, "compact": 2.2, "turn": 2.2, "end": 2.0,
           "beside": 2.2}
CREDENTIAL = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"  # a GitHub token's shape; redaction replaces it
SHELL = "sh -c 'python -c pass'"
GIT_ENV = {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@x.invalid", "GIT_COMMITTER_NAME": "b",
           "GIT_COMMITTER_EMAIL": "b@x.invalid"}


def find_python(version: str) -> str | None:
    if f"{sys.version_info[0]}.{sys.version_info[1]}" == version:
        return sys.executable
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    found = sorted(root.glob(f"{version}.*/bin/python{version}"), key=lambda p: [int(x) for x in
                   p.parts[-3].split(".") if x.isdigit()])
    return str(found[-1]) if found else shutil.which(f"python{version}")


def run(argv: list[str], **kw: object) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(argv, capture_output=True, check=True, **kw)  # type: ignore[call-overload,no-any-return]


class Install:
    """One virtualenv holding the wheel, and a repository whose hooks run from it."""

    def __init__(self, tmp: Path, python: str, wheel: Path, name: str, upgrade_pip: bool) -> None:
        self.name, self.venv = name, tmp / name
        run([python, "-m", "venv", str(self.venv)])
        py = self.venv / "bin" / "python"
        if upgrade_pip:
            done = subprocess.run([str(py), "-m", "pip", "install", "-q", "--upgrade", "pip"], capture_output=True,
                                  check=False, timeout=300)
            if done.returncode != 0:
                print(f"  ({name}: a current pip could not be installed, so this install has the venv's own pip: "
                      f"{done.stderr.decode(errors='replace').strip().splitlines()[-1:]})")
        run([str(py), "-m", "pip", "install", "-q", "--no-deps", str(wheel)])
        self.pip = run([str(py), "-m", "pip", "--version"]).stdout.decode().split()[1]
        self.python = str(py)
        self.repo = tmp / f"repo-{name}"
        self.repo.mkdir()
        env = {**os.environ, **GIT_ENV}
        for cmd in (["git", "init", "-q"], ["git", "commit", "-q", "--allow-empty", "-m", "x"],
                    [str(Path(sys.executable).parent / "majordomus"), "init"]):
            run(cmd, cwd=self.repo, env=env)
        self.launcher = self.venv / "bin" / "majordomus-hook"
        self.env = {**os.environ, "PATH": f"{self.venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}
        self.prompts = 0


def argv_of(install: Install, form: str, tail: tuple[str, ...]) -> list[str]:
    if form == "per-person":  # `[ -x python ] && [ -f launcher ] || exit 0; python -IS launcher … 2>/dev/null`
        return ["sh", "-c", local_command(install.launcher, tail).removesuffix("; exit 0").replace(" 2>/dev/null", "")]
    if form == "shared":  # the launcher by name on PATH, its interpreter started -IS by the shell
        return ["sh", "-c", shared_command(tail).removesuffix("; exit 0").replace(" 2>/dev/null", "")]
    return [str(install.venv / "bin" / "majordomus"), *tail]


FORMS = ("per-person", "shared", "console")
CPU: dict[str, list[float]] = {}  # the same samples in CPU seconds (user + system) of the child: steadier under load


def timed(argv: list[str], cwd: Path, payload: bytes, errors: list[str], what: str,
          env: dict[str, str] | None = None) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, input=payload, capture_output=True, check=False, env=env)
    elapsed = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU.setdefault(what, []).append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    if done.returncode != 0:
        errors.append(f"{what}: exit {done.returncode}: {done.stderr.decode(errors='replace')[:200]}")
    return elapsed


def sitting(install: Install, form: str, i: int, samples: dict[str, list[float]], errors: list[str]) -> None:
    sid = f"{form}-{i}"
    session = ("capture", "session", "--provider", "claude-code", "--event")
    prompt = ("capture", "prompt", "--provider", "claude-code")
    steps = [
        ("start", (*session, "start"), {"hook_event_name": "SessionStart", "source": "startup"}),
        ("prompt", prompt, {"hook_event_name": "UserPromptSubmit", "prompt": f"please refactor module {i} and "
                                                                              "keep the tests green"}),
        ("credential", prompt, {"hook_event_name": "UserPromptSubmit", "prompt": f"push with {CREDENTIAL} {i}"}),
        ("compact", (*session, "compact"), {"hook_event_name": "PreCompact", "trigger": "manual"}),
        ("turn", (*session, "turn"), {"hook_event_name": "Stop"}),
        ("end", (*session, "end"), {"hook_event_name": "SessionEnd", "reason": "logout"}),
    ]
    # a second agent started beside the first (its start recovers what of the worktree is stale), and its end
    steps[1:1] = [("beside", (*session, "start"), {"hook_event_name": "SessionStart", "source": "startup",
                                                    "session_id": f"{sid}-beside"}),
                  ("beside-end", (*session, "end"), {"hook_event_name": "SessionEnd", "reason": "logout",
                                                     "session_id": f"{sid}-beside"})]
    for kind, tail, body in steps:
        payload = json.dumps({"session_id": sid, "cwd": str(install.repo), **body}).encode()
        key = f"{install.name} {form} {kind}"
        # the baseline is run just before each hook, so both meet the machine in the same state: on a VM, where
        # a process runs in a round (first, or after a heavier one) moved its time by ~7%
        samples["python -c pass"].append(timed([install.python, "-c", "pass"], install.repo, b"", errors,
                                               "python -c pass"))
        samples.setdefault(key, []).append(timed(argv_of(install, form, tail), install.repo, payload, errors, key,
                                                 install.env))
    install.prompts += 2


def check(install: Install, errors: list[str]) -> None:
    log = install.repo / ".ai/local/hook-failures.log"
    if log.exists() and log.read_text().strip():
        errors.append(f"{install.name}: hook-failures.log: {log.read_text()[:300]}")
    records = list((install.repo / ".ai/local/prompts").glob("*.json"))
    if len(records) != install.prompts:
        errors.append(f"{install.name}: {len(records)} prompt records, {install.prompts} prompts captured")
    held = [r.name for r in records if CREDENTIAL in r.read_text()]
    if held:
        errors.append(f"{install.name}: the credential reached {held[:3]}")


def bench_python(version: str, python: str, rounds: int, old_pip: bool, wheel: Path, tmp: Path) -> list[str]:
    errors: list[str] = []
    installs = [Install(tmp, python, wheel, f"{version}-current-pip", upgrade_pip=True)]
    if old_pip:
        installs.insert(0, Install(tmp, python, wheel, f"{version}-venv-pip", upgrade_pip=False))
    samples: dict[str, list[float]] = {"python -c pass": [], SHELL: [], f"{SHELL} bare": []}
    bare_python = installs[0].python
    for i in range(rounds):
        samples[f"{SHELL} bare"].append(timed([bare_python, "-c", "pass"], tmp, b"", errors, f"{SHELL} bare"))
        samples[SHELL].append(timed(["sh", "-c", f"{bare_python} -c pass"], tmp, b"", errors, SHELL))
        # each install and each form takes every place in a round in turn: a process run second in a round was
        # measured ~1 ms slower than the same one run first (two identical installs differed by 7%)
        for install in installs[i % len(installs):] + installs[:i % len(installs)]:
            for form in FORMS[i % 3:] + FORMS[:i % 3]:
                sitting(install, form, i, samples, errors)
    for install in installs:
        check(install, errors)
    bare = statistics.median(samples["python -c pass"])
    bare_cpu = statistics.median(CPU["python -c pass"])
    # what `sh -c` costs around any command: against the bare run just before it
    shell = max(0.0, statistics.median(samples[SHELL]) - statistics.median(samples[f"{SHELL} bare"]))
    shell_cpu = max(0.0, statistics.median(CPU[SHELL]) - statistics.median(CPU[f"{SHELL} bare"]))
    print(f"\nPython {version} ({python}), {rounds} alternated rounds; python -c pass {bare * 1000:.1f} ms, "
          f"the shell a client wraps a command in +{shell * 1000:.1f} ms (taken off the wired forms' figures)")
    for install in installs:
        print(f"  {install.name}: pip {install.pip}")
        print(f"    {'hook':<11}" + "".join(f"{form:>31}" for form in ("per-person", "shared", "console"))
              + f"{'target':>9}")
        for kind, target in TARGETS.items():
            cells = []
            for form in ("per-person", "shared", "console"):
                key = f"{install.name} {form} {kind}"
                wired = form != "console"
                med = statistics.median(samples[key]) - (shell if wired else 0.0)
                over = "" if not wired or med / bare <= target else " !"
                cpu = (statistics.median(CPU[key]) - (shell_cpu if wired else 0.0)) / bare_cpu if bare_cpu else 0.0
                cells.append(f"{med * 1000:6.1f} ms {med / bare:4.2f}× cpu {cpu:4.2f}×{over:2}")
            print(f"    {kind:<11}" + "".join(f"{c:>31}" for c in cells) + f"{'≤ ' + str(target):>9}")
    return errors


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--pythons", nargs="*", default=[f"{sys.version_info[0]}.{sys.version_info[1]}"])
    ap.add_argument("--no-old-pip", action="store_true", help="only the current pip's install")
    args = ap.parse_args()
    errors: list[str] = []
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp / "wheel"), str(ROOT)])
        [wheel] = (tmp / "wheel").glob("majordomus-*.whl")
        print(f"hook latency: {wheel.name}, installed --no-deps; wall time and its ratio to python -c pass, then the "
              f"ratio of CPU time (user + system, steadier on a loaded machine); '!' marks a wall ratio over its "
              f"target; load average {os.getloadavg()[0]:.2f}")
        for version in args.pythons:
            python = find_python(version)
            if python is None:
                print(f"\nPython {version}: not found on this machine (pyenv or PATH); skipped")
                continue
            errors += bench_python(version, python, args.rounds, not args.no_old_pip, wheel, tmp)
    for line in errors[:20]:
        print(f"ERROR {line}")
    print(f"\n{len(errors)} error(s)")
    return 1 if errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
