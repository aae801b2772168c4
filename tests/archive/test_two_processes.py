"""Over a large archive doctor, reconcile, render and prune's reading work in two processes at once
(`scan.halves`, from 8192 records on a machine with a second core), and answer exactly what one process answers.

Through the real executables: the same archive, with faults in both halves, run as it runs and pinned to one core
(`taskset -c 0`: one part), each command's words, every file's bytes, mode and fingerprint compared. The library
tests prove that a child that dies loses nothing (its half is done again), and that reconcile's parts merge into
the decisions of one pass over generated histories.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from majordomus.archive import scan
from majordomus.archive.reconcile import reconcile
from majordomus.layout import Layout
from reconcile_histories import NOW, build, histories
from support import MAJORDOMUS, fill_archive, make_initialised

COUNT = scan.SPLIT_AT + 808  # two parts, each side of the cut with its faults


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return 1


two_cores = pytest.mark.skipif(shutil.which("taskset") is None or _cores() < 2,
                               reason="needs taskset and a second core: on one core there is one part only")


def state(prompts: Path) -> dict[str, tuple[int, int, bytes]]:
    """Every file of the archive: mode, a rendering's fingerprint (its mtime's nanoseconds), bytes."""
    out = {}
    for p in sorted(prompts.iterdir()):
        st = p.lstat()
        data = os.readlink(p).encode() if p.is_symlink() else p.read_bytes()
        out[p.name] = (st.st_mode, st.st_mtime_ns % 10**9 if p.suffix in (".md", ".yaml") else 0, data)
    return out


def faulted(repo: Path) -> None:
    """A record that does not parse, one readable by others, one with a rendering that says something else,
    in each half; a stray rendering and a symlink under a record's name."""
    prompts = Layout(repo).prompts_dir
    names = sorted(p.name for p in prompts.glob("*.json"))
    for k in (3, COUNT // 2 + 11):
        (prompts / names[k]).write_bytes(b"{not json")
    for k in (31, COUNT - 29):
        os.chmod(prompts / names[k], 0o644)
    for k in (52, COUNT // 2 + 53):
        md = prompts / (names[k][:-5] + ".md")
        md.write_text("tampered\n")
        os.chmod(md, 0o600)
    (prompts / "29990101000000-prompt-stray.md").write_text("a stray\n")
    os.symlink("/etc/hostname", prompts / "29990101000000-prompt-link.json")


def run(repo: Path, *args: str, pinned: bool) -> tuple[int, str]:
    argv = ["taskset", "-c", "0", str(MAJORDOMUS), *args] if pinned else [str(MAJORDOMUS), *args]
    done = subprocess.run(argv, cwd=repo, capture_output=True, text=True, timeout=300)
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, done.stdout


@pytest.mark.slow
@two_cores
def test_two_processes_answer_and_write_what_one_does(tmp_path: Path, run_majordomus) -> None:
    repo = make_initialised(tmp_path / "repo", run_majordomus)
    fill_archive(repo, COUNT)
    faulted(repo)
    prompts = Layout(repo).prompts_dir
    pristine = tmp_path / "pristine"
    shutil.copytree(prompts, pristine, symlinks=True)  # copy2: the renderings' mtimes (fingerprints) kept

    def restore() -> None:
        shutil.rmtree(prompts)
        shutil.copytree(pristine, prompts, symlinks=True)

    for args in (("doctor",), ("capture", "reconcile", "--dry-run"), ("capture", "prune", "--dry-run")):
        split, one = run(repo, *args, pinned=False), run(repo, *args, pinned=True)
        assert split == one, args
    code, said = run(repo, "doctor", pinned=False)
    assert code == 10 and "2 record(s) have a rendering that says something else" in said, said
    assert f"{COUNT // 10} record(s) lack a rendering" in said, said
    for args in (("capture", "reconcile"), ("capture", "render"), ("capture", "render", "--force")):
        answers, files = [], []
        for pinned in (False, True):
            restore()
            answers.append(run(repo, *args, pinned=pinned))
            files.append(state(prompts))
        assert answers[0] == answers[1], args
        assert files[0] == files[1], args
        assert answers[0][0] == 0, answers[0]
    pruned = []  # prune gathers the bodies in two parts: the same bodies taken (their tombstones carry the time)
    for pinned in (False, True):
        restore()
        pruned.append((run(repo, "capture", "prune", pinned=pinned),
                       sorted(p.name for p in prompts.glob("*.json") if not p.is_symlink()
                              and b'"text": null' in p.read_bytes())))
    assert pruned[0] == pruned[1]
    assert pruned[0][0][0] == 0 and len(pruned[0][1]) >= COUNT // 10 - 2, pruned[0][0]
    # the last render left every record rendered, each rendering agreeing, both halves alike
    assert "rendering(s) lack" not in run(repo, "doctor", pinned=False)[1]


def test_a_child_that_dies_loses_nothing_its_half_is_done_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scan, "_second_core", lambda: True)
    parent = os.getpid()
    names = [f"{n:06d}" for n in range(scan.SPLIT_AT + 1)]

    def work(part: list[str]) -> list[str]:
        return list(part)

    assert [len(p) for p in scan.halves(names, work)] == [len(names) // 2, len(names) - len(names) // 2]
    assert sum(scan.halves(names, work), []) == names

    def dies(part: list[str]) -> list[str]:
        if os.getpid() != parent:
            os._exit(9)  # as a kill -9 would leave it: no answer
        return list(part)

    def raises(part: list[str]) -> list[str]:
        if os.getpid() != parent:
            raise MemoryError("the child could not finish")
        return list(part)

    def unpicklable(part: list[str]) -> object:
        return (lambda: part) if os.getpid() != parent else list(part)

    for work_ in (dies, raises, unpicklable):
        parts = scan.halves(names, work_)
        assert len(parts) == 2 and sum(parts, []) == names, work_.__name__  # type: ignore[arg-type]
    assert scan.halves(names[:10], work) == [names[:10]]  # a small archive: one part, no fork


def _sticking_out(moment: int) -> dict:
    """A provider session's span sticks out of its only episode (10-30) by one record, at `moment`."""
    episode = {"sid": "s-0-0", "opened": 10, "closed": 30, "evidence": "record-only"}
    moments = sorted([15, 20, 25, moment])
    return {"sessions": [{"ps": "ps-0", "episodes": [episode]}],
            "prompts": [(m, "ps-0", "orphan") for m in moments]}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories(spread=10, evidence=st.sampled_from(["record-only"] * 3 + ["context", "open"]),
                 gathered=True))
@example(_sticking_out(5))  # one record outside the episode, alone in the first part: no link, as in one pass
@example(_sticking_out(35))  # ... alone in the second part
def test_reconcile_in_two_parts_decides_what_one_pass_decides(history: dict) -> None:
    """Random histories, each session's prompts gathered in or around one of its episodes (so tier 3 has spans
    to place), reconciled in one part and in two (cut in the middle by name, that is by time, so a session's
    records and span may lie in both): the same records, the same counts."""
    outcomes = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "repo"
        for split in (False, True):
            if root.exists():
                shutil.rmtree(root)
            root.mkdir()
            layout = build(root, history)[0].layout
            with pytest.MonkeyPatch.context() as mp:
                if split:
                    mp.setattr(scan, "SPLIT_AT", 2)
                    mp.setattr(scan, "_second_core", lambda: True)
                result = reconcile(layout, now=NOW)
            records = {p.name: json.loads(p.read_bytes()) for p in layout.prompts_dir.glob("*.json")}
            outcomes.append((result, records))
            event("tier 3 linked" if any(r["episode_link"] == "ledger" for r in records.values()) else "no tier 3")
    assert outcomes[0] == outcomes[1]
