"""The prompt archive's costs, as figures a person reads (no asserts).

1. `capture prompt` latency against the bare interpreter (`python -c pass`), alternated, medians and ratio.
2. reconcile, prune, render and doctor's archive findings on synthetic archives of 1k, 10k and 100k records
   (written directly as files): time per record at each size, and the growth ratio against 1k; and a migrated
   archive (100k orphan records across 500 provider sessions, no episodes): doctor, reconcile --dry-run and
   prune --dry-run against the bare read+parse of the same records.
3. redaction throughput on ordinary prose, and the worst time per MB on adversarial input.

    .venv/bin/python bench/prompt_archive.py [--quick]     # --quick skips the 100k archive
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
from datetime import datetime, timedelta, timezone
from pathlib import Path

from majordomus.archive import record as rec
from majordomus.archive.render import fingerprint, render_md, render_yaml
from majordomus.identity import rfc3339, worktree_id
from majordomus.layout import Layout
from majordomus.simple_yaml import yaml_lines

BIN = Path(sys.executable).parent
MAJORDOMUS = BIN / "majordomus"


def git_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    for args in (["init", "-q", "-b", "main"], ["commit", "-q", "--allow-empty", "-m", "first"]):
        subprocess.run(["git", "-C", str(path), *args], check=True, capture_output=True)
    subprocess.run([str(MAJORDOMUS), "init"], cwd=path, check=True, capture_output=True)
    return path


def timed(cmd: list[str], cwd: Path, payload: bytes = b"") -> float:
    began = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, input=payload, capture_output=True, check=False)
    return time.perf_counter() - began


def latency(tmp: Path, rounds: int) -> None:
    # pip byte-compiles a regular install; an editable one under PYTHONDONTWRITEBYTECODE would recompile our
    # sources on every run, which no user's hook pays
    import compileall

    import majordomus

    compileall.compile_dir(str(Path(majordomus.__file__).parent), quiet=1)
    repo = git_repo(tmp / "latency")
    subprocess.run([str(MAJORDOMUS), "capture", "session", "--provider", "claude-code", "--event", "start"], cwd=repo,
                   input=json.dumps({"session_id": "bench", "source": "startup"}).encode(), check=True,
                   capture_output=True)
    bare, open_, orphan = [], [], []  # the open prompt carries a credential: it pays for the assignment rule
    for n in range(rounds):  # alternated, so drift in the machine's load falls on all three alike
        bare.append(timed([sys.executable, "-c", "pass"], repo))
        body = {"session_id": "bench", "prompt_id": f"b-{n}", "prompt": f"Benchmark prompt number {n}, "
                "with a token=Zq81kdjQm2hf7Kp0aaXy in it"}
        open_.append(timed([str(MAJORDOMUS), "capture", "prompt", "--provider", "claude-code"], repo,
                           json.dumps(body).encode()))
        orphan.append(timed([str(MAJORDOMUS), "capture", "prompt", "--provider", "claude-code"], repo,
                            json.dumps({"session_id": "nobody", "prompt": f"orphan {n}"}).encode()))
    b = statistics.median(bare)
    print(f"capture prompt latency ({rounds} alternated runs, medians)")
    print(f"  python -c pass                     {b * 1000:7.1f} ms")
    for label, xs in (("capture prompt (open episode, id)", open_), ("capture prompt (orphan, no id)", orphan)):
        m = statistics.median(xs)
        p90 = sorted(xs)[int(len(xs) * .9)]
        print(f"  {label:<34} {m * 1000:7.1f} ms   ratio {m / b:4.2f}x   (p90 {p90 * 1000:.1f} ms)")


BASE = datetime(2026, 1, 1, tzinfo=timezone.utc)


def empty_layout(root: Path) -> Layout:
    """The folders of the layer an archive lives in, none holding anything yet."""
    layout = Layout(root)
    for d in (layout.prompts_dir, layout.sessions_open, layout.contexts_dir, layout.sessions_dir, layout.locks,
              layout.policy_file.parent):
        d.mkdir(parents=True, exist_ok=True)
    os.chmod(layout.prompts_dir, 0o700)
    return layout


def synthesize(root: Path, count: int, base: datetime = BASE) -> Layout:
    """An archive of `count` records over 200 days and 50 provider sessions, each with its renderings.

    Every 10th record is legacy (no provenance: reconcile rewrites it), every 10th lacks its renderings
    (render writes them), bodies span the whole period (prune's age bound takes the oldest tenth).
    """
    layout = empty_layout(root)
    span = 200 * 86400
    here = worktree_id(root)
    layout.policy_file.write_text("prompts:\n  retention_max_days: 180\n  retention_max_bytes: 1000000000\n")
    for n in range(50):  # one closed episode per session, each with its working context
        opened = base + timedelta(seconds=n * span // 50)
        closed = opened + timedelta(seconds=span // 50 - 1)
        meta = [("schema", "session-context/v1"), ("kind", "session-context"), ("session_id", f"s-{n}"),
                ("opened_at", rfc3339(opened)), ("provider", "claude-code"), ("provider_session", f"ps-{n}"),
                ("worktree_id", here)]
        close = yaml_lines([("closed_at", rfc3339(closed)), ("outcome", "closed")])
        (layout.contexts_dir / f"{n:04d}--s-{n}.md").write_text(
            "---\n" + "\n".join(yaml_lines(meta)) + "\n---\n\n## Close\n" + "\n".join(close) + "\n")
    directory = layout.prompts_dir
    for i in range(count):
        moment = base + timedelta(seconds=i * span // count)
        ps = f"ps-{i * 50 // count}"
        record = {"schema": rec.SCHEMA, "started_at": rfc3339(moment), "provider": "claude-code",
                  "event": "UserPromptSubmit", "id": f"id-{i}", "session": ps,
                  "episode": f"s-{i * 50 // count}", "episode_link": "session-context",
                  "repository_id": "local:bench", "worktree_id": here, "source": None,
                  "cwd": str(root), "branch": "main", "head": "0" * 40,
                  "text": f"Prompt {i}: please refactor the module and explain the change in plain words. " * 3}
        if i % 10 == 5:
            for key in ("episode", "episode_link"):
                del record[key]
        record = rec.PromptRecord.from_members(record)
        stem = f"{moment:%Y%m%d%H%M%S}-prompt-{i}"
        fd = os.open(directory / f"{stem}.json", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, rec.dumps(record))
        os.close(fd)
        if i % 10 != 7:  # as the writer leaves them: carrying the record's fingerprint (archive/render.py)
            mark = fingerprint(rec.dumps(record))
            for suffix, text in ((".md", render_md(record, stem)), (".yaml", render_yaml(record, stem))):
                fd = os.open(directory / f"{stem}{suffix}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                os.write(fd, text.encode())
                os.utime(fd, ns=(0, int(time.time()) * 10**9 + mark))
                os.close(fd)
    return layout


def synthesize_orphans(root: Path, count: int, sessions: int = 500, base: datetime = BASE) -> Layout:
    """A migrated archive: `count` records across `sessions` provider sessions, every one an orphan (captured
    when no episode was open), no episode, working context or closed record anywhere: tier 3 has no candidate,
    so nothing links and every record stays as it is."""
    layout = empty_layout(root)
    span = 200 * 86400
    here = worktree_id(root)
    for i in range(count):
        moment = base + timedelta(seconds=i * span // count)
        record = rec.PromptRecord.from_members({
            "schema": rec.SCHEMA, "started_at": rfc3339(moment), "provider": "claude-code",
            "event": "UserPromptSubmit", "id": f"id-{i}", "session": f"ps-{i % sessions}", "episode": None,
            "episode_link": "orphan", "repository_id": "local:bench", "worktree_id": here, "source": None,
            "cwd": str(root), "branch": "main", "head": "0" * 40,
            "text": f"Prompt {i}: please refactor the module and explain the change in plain words. " * 3})
        fd = os.open(layout.prompts_dir / f"{moment:%Y%m%d%H%M%S}-prompt-{i}.json",
                     os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, rec.dumps(record))
        os.close(fd)
    return layout


def orphans(tmp: Path, count: int = 100000, sessions: int = 500, rounds: int = 5) -> None:
    """The migrated shape: doctor, reconcile --dry-run and prune --dry-run against the bare read+parse of the
    same records, alternated, `rounds` times; medians and ratios."""
    root = tmp / "orphans"
    git_repo(root)
    layout = synthesize_orphans(root, count, sessions)
    os.sync()
    child([sys.executable, "-c", BARE, str(layout.prompts_dir)], root)  # untimed: every round reads a warm cache
    steps = (("doctor", ["doctor"], None), ("reconcile --dry-run", ["capture", "reconcile", "--dry-run"], 1.5),
             ("prune --dry-run", ["capture", "prune", "--dry-run"], None))
    bare: list[float] = []
    took: dict[str, list[float]] = {step: [] for step, _, _ in steps}
    flags: dict[str, str] = {step: "" for step, _, _ in steps}
    for _ in range(rounds):
        for step, argv, _ in steps:
            bare_s, _, _, _, counted = child([sys.executable, "-c", BARE, str(layout.prompts_dir)], root)
            bare.append(bare_s)
            seconds, _, _, code, printed = child([str(MAJORDOMUS), *argv], root)
            took[step].append(seconds)
            if code not in (0, 1):
                flags[step] = f"  (exit {code})"
            if step == "reconcile --dry-run" and f"{count} record(s); 0 would be linked, 0 already linked, " \
                    f"{count} have no evidence" not in printed:
                flags[step] += f"  WRONG: {printed.strip()[:120]}"
    b = statistics.median(bare)
    print(f"\nmigrated archive: {count} orphan records across {sessions} provider sessions, no episodes "
          f"({rounds} alternated rounds, medians; bare read+parse {b:.2f} s)")
    for step, _, target in steps:
        m = statistics.median(took[step])
        runs = ", ".join(f"{x / b:.2f}x" for x in took[step])
        print(f"  {step:<22} {m:7.2f} s   ratio {m / b:5.2f}x  {'<= ' + str(target) + 'x' if target else '':>8}"
              f"   (runs {runs}){flags[step]}")
    shutil.rmtree(root)


def operations(layout: Layout) -> dict[str, float]:
    from majordomus.archive.findings import findings
    from majordomus.archive.prune import prune
    from majordomus.archive.reconcile import reconcile
    from majordomus.archive.repair import render_all, repair_modes

    now = BASE + timedelta(days=200)
    out: dict[str, float] = {}
    began = time.perf_counter()
    findings(layout)
    out["doctor findings"] = time.perf_counter() - began
    began = time.perf_counter()
    reconcile(layout, dry_run=True, now=now)
    out["reconcile --dry-run"] = time.perf_counter() - began
    began = time.perf_counter()
    reconcile(layout, now=now)
    out["reconcile (10% rewritten)"] = time.perf_counter() - began
    began = time.perf_counter()
    prune(layout, now=now)
    out["prune (10% pruned)"] = time.perf_counter() - began
    began = time.perf_counter()
    repair_modes(layout)
    render_all(layout)
    out["render (10% rendered)"] = time.perf_counter() - began
    return out


def archives(tmp: Path, sizes: list[int]) -> None:
    print("\narchive operations (in-process; time per record, and growth against the smallest archive)")
    results: dict[int, dict[str, float]] = {}
    for size in sizes:
        began = time.perf_counter()
        layout = synthesize(tmp / f"archive-{size}", size)
        made = time.perf_counter() - began
        results[size] = operations(layout)
        print(f"  {size:>7} records (written in {made:.1f} s)")
        for name, seconds in results[size].items():
            per = seconds / size * 1e6
            growth = per / (results[sizes[0]][name] / sizes[0] * 1e6)
            print(f"    {name:<28} {seconds:8.2f} s   {per:7.1f} µs/record   growth {growth:4.2f}x")
        shutil.rmtree(layout.root)


BARE = """
import json, os, sys
d = sys.argv[1]
n = 0
for name in sorted(x for x in os.listdir(d) if x.endswith(".json")):
    fd = os.open(os.path.join(d, name), os.O_RDONLY | os.O_NOFOLLOW)
    raw = os.read(fd, 1 << 20)
    os.close(fd)
    json.loads(raw)
    n += 1
print(n)
"""


# ru_maxrss counts what a child held before its exec, and a child forked (or vforked) from this process starts
# holding this process's pages: measured from here, every child would weigh at least what the bench weighs.
# A bare interpreter (-I -S, ~8 MiB) launches each child instead and reports its time and peak: the largest
# process's (ru_maxrss covers the processes it waited for), and the whole tree's PSS, polled every 20 ms (a
# command over a large archive works in two processes: PSS counts the pages they share once, RSS twice).
LAUNCHER = """
import json, os, sys, threading, time
began = time.perf_counter()
pid = os.fork()
if pid == 0:
    fd = os.open(os.devnull, os.O_WRONLY)
    os.dup2(os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), 1)  # its answer, to be checked
    os.dup2(fd, 2)
    os.execv(sys.argv[2], sys.argv[2:])
peak = [0]
done = threading.Event()
def tree(p):
    try:
        with open(f"/proc/{p}/task/{p}/children") as f:
            return [p] + [q for c in f.read().split() for q in tree(int(c))]
    except OSError:
        return []
def pss(p):
    try:
        with open(f"/proc/{p}/smaps_rollup") as f:
            return next((int(line.split()[1]) for line in f if line.startswith("Pss:")), 0)
    except OSError:
        return 0
def poll():
    while not done.wait(0.02):
        peak[0] = max(peak[0], sum(pss(p) for p in tree(pid)))
threading.Thread(target=poll, daemon=True).start()
_, status, usage = os.wait4(pid, 0)
done.set()
print(json.dumps([time.perf_counter() - began, usage.ru_maxrss / 1024, peak[0] / 1024,
                  os.waitstatus_to_exitcode(status)]))
"""


def child(cmd: list[str], cwd: Path) -> tuple[float, float, float, int, str]:
    """(seconds, peak RSS of its largest process in MiB, peak PSS of its process tree in MiB, exit code, what it
    printed) of one real subprocess, launched by a bare interpreter."""
    with tempfile.NamedTemporaryFile(prefix="bench-out-") as out:
        done = subprocess.run([sys.executable, "-I", "-S", "-c", LAUNCHER, out.name, *cmd], cwd=cwd,
                              capture_output=True, text=True, check=True)
        printed = Path(out.name).read_text(errors="replace")
    seconds, mib, tree_mib, code = json.loads(done.stdout)
    return float(seconds), float(mib), float(tree_mib), int(code), printed


def wrong(label: str, size: int, printed: str) -> str:
    """What a command answered wrong about the synthesized archive ('' when right): a fast wrong answer must
    not pass for a fast one. The tenth without renderings and the tenth of legacy records are known exactly."""
    expect = {"doctor": [f"{size // 10} record(s) lack a rendering",
                         f"{size // 10} record(s) say nothing about which episode"],
              "reconcile --dry-run": [f"{size} record(s); {size // 10} would be linked, {size - size // 10} "
                                      "already linked"],
              "render": ["0 rendering(s) written"]}.get(label, [])
    missing = [e for e in expect if e not in printed]
    return f"  WRONG: no '{missing[0]}'" if missing else ""


def commands(tmp: Path, sizes: list[int]) -> dict[int, dict[str, float]]:
    """The real commands on archives of each size, each against a bare read+parse of every record (a child of
    the same interpreter) timed just before it; the peak RSS of each command's largest process and the peak
    PSS of its process tree (the target's measure). Bodies span 200 days back from now, so
    a first prune takes the oldest tenth (older than the policy's 180 days).

    The growth compares the sizes under one state of the machine: every archive is written first, and each step
    runs on the smallest, the larger ones, then a second archive of the smallest size, seconds apart; the
    smallest's time is the mean of the two that bracket the others. Run minutes apart (the smallest first, then
    the largest after it was written), the growth measured the disk's drift as well: on a disk mounted `discard`
    the same prune of 100k records took 3.8 s and 6.5 s in one hour. Before each command the writes still
    pending (the archive's making, the step before) go to disk untimed: no command pays another's writeback."""
    print("\narchive commands (real subprocesses; ratio = command / the median of the bare reads+parses of every "
          "record of that size, one just before each command)")
    print(f"  {'size':>9} {'command':<26} {'seconds':>8} {'bare s':>7} {'ratio':>6} {'target':>7} "
          f"{'peak MiB':>9} {'tree PSS':>9} {'target':>7}")
    base = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(days=200)
    small, big = sizes[0], sizes[-1]
    # (label, size): the smallest before and after the others
    runs = [(f"{small} a", small), *((str(size), size) for size in sizes[1:]), (f"{small} b", small)]
    layouts = {}
    for label, size in runs:
        root = tmp / f"commands-{label.replace(' ', '-')}"
        git_repo(root)
        layouts[label] = synthesize(root, size, base)
    out: dict[str, dict[str, float]] = {label: {} for label, _ in runs}
    bares: dict[str, list[float]] = {label: [] for label, _ in runs}
    rows: dict[str, list[tuple[str, float, float, str, float, float, str]]] = {label: [] for label, _ in runs}
    steps = (("doctor", ["doctor"], 1.5), ("reconcile --dry-run", ["capture", "reconcile", "--dry-run"], 1.5),
             ("reconcile", ["capture", "reconcile"], None), ("prune (first, 10%)", ["capture", "prune"], None),
             ("render --force", ["capture", "render", "--force"], None), ("render", ["capture", "render"], 1.5))
    for step, argv, ratio_target in steps:
        for label, size in runs:
            layout = layouts[label]
            os.sync()
            bare_s, _, _, _, counted = child([sys.executable, "-c", BARE, str(layout.prompts_dir)], layout.root)
            seconds, mib, tree_mib, code, printed = child([str(MAJORDOMUS), *argv], layout.root)
            out[label][step] = seconds
            bares[label].append(bare_s)
            target = {"prune (first, 10%)": "<= 3 s" if size == 10000 else "", "render --force": "<= 30 s"
                      if size == 100000 else ""}.get(step, f"<= {ratio_target}x" if ratio_target else "")
            flag = "" if code in (0, 1) else f"  (exit {code})"
            flag += wrong(step, size, printed) + ("" if counted.strip() == str(size) else
                                                  f"  WRONG: the bare read counted {counted.strip()}")
            rows[label].append((step, seconds, bare_s, target, mib, tree_mib, flag))
    for label, _ in runs:
        # each ratio against the median of this archive's bare reads (one just before each command): one slow or
        # fast bare read moves one command's ratio no more than the others'
        bare_median = statistics.median(bares[label])
        for step, seconds, bare_s, target, mib, tree_mib, flag in rows[label]:
            print(f"  {label:>9} {step:<26} {seconds:8.2f} {bare_s:7.2f} {seconds / bare_median:5.2f}x {target:>7} "
                  f"{mib:9.1f} {tree_mib:9.1f} {'<= 100':>7}{flag}")
        shutil.rmtree(layouts[label].root)
    result = {size: {step: seconds for step, seconds in out[label].items()} for label, size in runs[1:-1]}
    result[small] = {step: (out[f"{small} a"][step] + out[f"{small} b"][step]) / 2 for step in out[f"{small} a"]}
    if len(sizes) > 1:
        print(f"  growth {small}->{big}, against the mean of {small} a and b (target <= {big / small * 1.1:.0f}x):")
        for step in result[big]:
            print(f"    {step:<26} {result[big][step] / result[small][step]:6.2f}x   "
                  f"({small} a {out[f'{small} a'][step]:.2f} s, b {out[f'{small} b'][step]:.2f} s)")
        drift = statistics.median(bares[str(big)]) / statistics.median(bares[f"{small} a"] + bares[f"{small} b"])
        print(f"    {'(the bare read, median)':<26} {drift:6.2f}x")
    return result


def footprint(tmp: Path, count: int = 1000) -> None:
    """Bytes and inodes per prompt on disk: record, renderings, against the text typed."""
    root = tmp / "footprint"
    git_repo(root)
    layout = synthesize(root, count)
    per: dict[str, list[int]] = {}
    text_bytes = 0
    for entry in os.scandir(layout.prompts_dir):
        kind = entry.name.rsplit(".", 1)[-1]
        st = entry.stat(follow_symlinks=False)
        per.setdefault(kind, []).append(st.st_blocks * 512)
        per.setdefault(kind + "_apparent", []).append(st.st_size)
        if kind == "json":
            record = rec.parse(rec.read_bytes(Path(entry.path)))
            text_bytes += len(str(record.text).encode())
    text = text_bytes / count
    print(f"\nfootprint per prompt ({count} records, text {text:.0f} B each on average)")
    total = 0.0
    for kind in ("json", "md", "yaml"):
        on_disk = sum(per.get(kind, [])) / count
        apparent = sum(per.get(kind + "_apparent", [])) / count
        total += on_disk
        print(f"  .{kind:<5} {len(per.get(kind, [])) / count:4.2f} inode(s)  {apparent:7.0f} B apparent  "
              f"{on_disk:7.0f} B on disk")
    inodes = sum(len(per.get(k, [])) for k in ("json", "md", "yaml")) / count
    print(f"  total {inodes:.2f} inode(s), {total:.0f} B on disk = {total / text:.1f}x the text")
    shutil.rmtree(root)


def redaction() -> None:
    from majordomus.redact import redact

    prose = ("The parser keeps a small table of token kinds; when a line ends in a backslash the next line "
             "continues it. Please refactor it, keep the tests green, and explain the change in plain words.\n")
    text = prose * (1024 * 1024 // len(prose))
    began = time.perf_counter()
    redact(text)
    seconds = time.perf_counter() - began
    print(f"\nredaction: {len(text) / 1e6 / seconds:.1f} MB/s on ordinary prose ({len(text) / 1e6:.1f} MB)")
    worst = 0.0
    for label, adversarial in (("one character", "a" * 1_000_000), ("sk- prefix repeated", "sk-" * 333_333),
                               ("unterminated assignment", "password=" + "A" * 999_990),
                               ("Bearer repeated", "Bearer " * 142_857), ("PEM header repeated",
                                                                          "-----BEGIN PRIVATE KEY-----\n" * 35_000)):
        began = time.perf_counter()
        redact(adversarial)
        per_mb = (time.perf_counter() - began) / (len(adversarial) / 1e6)
        worst = max(worst, per_mb)
        print(f"  adversarial {label:<26} {per_mb * 1000:8.1f} ms per MB")
    print(f"  worst case {worst * 1000:.1f} ms per MB")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="skip the 100k archive")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--commands-only", action="store_true", help="only the real commands and the footprint")
    ap.add_argument("--orphans-only", action="store_true", help="only the migrated archive of orphan records")
    args = ap.parse_args()
    sizes = [1000, 10000] if args.quick else [10000, 100000]
    with tempfile.TemporaryDirectory() as tmp:
        if args.orphans_only:
            orphans(Path(tmp), 10000 if args.quick else 100000)
            return
        if not args.commands_only:
            latency(Path(tmp), args.rounds)
            archives(Path(tmp), [1000, 10000] if args.quick else [1000, 10000, 100000])
        footprint(Path(tmp))
        commands(Path(tmp), sizes)
        orphans(Path(tmp), 10000 if args.quick else 100000)
    if not args.commands_only:
        redaction()


if __name__ == "__main__":
    main()
