"""The archive's commands do less per record (no rendering written again that already agrees, no fsync of a
rendering, a rendering overwritten in place), and lose nothing for it.

- `capture render --force` writes no rendering whose bytes already agree (two replacing renames a record were
  most of its 179 s at 100k); `capture render` re-stamps an agreeing rendering that lacks the fingerprint.
- A rewrite (prune, reconcile) fsyncs its record and no rendering; a rendering is written in place, never
  through a second hard link.
- Doctor still names every rendering that says something else than its record: one written from another
  version of the record (a rewrite killed between the renderings and the record), one a kill left empty and one
  a kill left padded mid-overwrite; a small rendering is overwritten without freeing its block.
- `PromptRecord.from_members`' direct path builds exactly what the checked constructor builds.

Through the real executables; the last is a library property test in addition.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from majordomus.archive import record as rec
from majordomus.archive.render import fingerprint, write_renderings
from support import MAJORDOMUS
from support import capture_prompt as capture

PROMPTS = ".ai/local/prompts"


def renderings(repo: Path) -> dict[str, tuple[int, int, bytes]]:
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns, p.read_bytes())
            for p in (repo / PROMPTS).iterdir() if p.suffix in (".md", ".yaml")}


def test_render_force_writes_no_rendering_that_already_agrees(initialised_repo: Path, run_majordomus) -> None:
    for n in range(3):
        capture(initialised_repo, f"prompt number {n}")
    before = renderings(initialised_repo)
    assert len(before) == 6
    forced = run_majordomus("capture", "render", "--force", cwd=initialised_repo)
    assert forced.returncode == 0 and forced.stdout.decode().startswith("0 rendering(s) written"), forced.stdout
    assert renderings(initialised_repo) == before  # same inode, same mtime, same bytes: nothing written
    assert run_majordomus("doctor", cwd=initialised_repo).returncode == 0


def test_render_stamps_an_agreeing_rendering_that_lacks_its_fingerprint_without_writing_it(
        initialised_repo: Path, run_majordomus) -> None:
    capture(initialised_repo, "written by an older majordomus")
    (record,) = (initialised_repo / PROMPTS).glob("*.json")
    md = record.with_suffix(".md")
    os.utime(md, ns=(md.stat().st_atime_ns, 1_700_000_000 * 10**9))  # an older writer's rendering: no fingerprint
    ino, data = md.stat().st_ino, md.read_bytes()
    done = run_majordomus("capture", "render", cwd=initialised_repo)
    assert done.returncode == 0 and done.stdout.decode().startswith("0 rendering(s) written"), done.stdout
    assert (md.stat().st_ino, md.read_bytes()) == (ino, data)
    assert md.stat().st_mtime_ns % 10**9 == fingerprint(record.read_bytes())


def test_doctor_names_renderings_written_from_another_version_of_the_record(initialised_repo: Path,
                                                                           run_majordomus) -> None:
    """What a prune killed between its renderings and its record leaves: renderings carrying the fingerprint of
    the pruned record, beside the record that still has its body."""
    capture(initialised_repo, "BODY-1 a prompt to prune")
    (path,) = (initialised_repo / PROMPTS).glob("*.json")
    record = rec.parse(path.read_bytes())
    pruned = rec.PromptRecord.from_members({**record.members(), "text": None, "pruned_at": "2026-12-03T08:00:00Z",
                                            "pruned_bytes": 24, "pruned_sha256": "0" * 64})
    write_renderings(path.parent, path.stem, pruned)
    doctor = run_majordomus("doctor", cwd=initialised_repo)
    assert doctor.returncode == 10 and b"says something else than the record" in doctor.stdout, doctor.stdout
    assert path.stem.encode() in doctor.stdout
    assert run_majordomus("capture", "render", cwd=initialised_repo).returncode == 0
    assert b"BODY-1" in path.with_suffix(".md").read_bytes()
    assert run_majordomus("doctor", cwd=initialised_repo).returncode == 0


def test_doctor_names_a_rendering_a_kill_left_empty_mid_write(initialised_repo: Path, run_majordomus) -> None:
    """An in-place write clears the fingerprint, then truncates: a kill just after leaves this."""
    capture(initialised_repo, "a prompt whose rendering is cut")
    (path,) = (initialised_repo / PROMPTS).glob("*.json")
    yml = path.with_suffix(".yaml")
    fd = os.open(yml, os.O_WRONLY)
    os.utime(fd, ns=(0, (os.fstat(fd).st_mtime_ns // 10**9) * 10**9))
    os.ftruncate(fd, 0)
    os.close(fd)
    doctor = run_majordomus("doctor", cwd=initialised_repo)
    assert doctor.returncode == 10 and b"says something else than the record" in doctor.stdout, doctor.stdout
    done = run_majordomus("capture", "render", cwd=initialised_repo)
    assert done.returncode == 0 and done.stdout.decode().startswith("1 rendering(s) written"), done.stdout
    assert yml.read_bytes().startswith(b"schema: ")
    assert run_majordomus("doctor", cwd=initialised_repo).returncode == 0


def test_doctor_names_a_rendering_a_kill_left_padded_mid_overwrite(initialised_repo: Path, run_majordomus) -> None:
    """An in-place overwrite within one page clears the fingerprint, writes the new bytes padded with newlines over
    the old length, then cuts: a kill before the cut leaves this (no old byte, no fingerprint)."""
    capture(initialised_repo, "a prompt whose rendering is overwritten")
    (path,) = (initialised_repo / PROMPTS).glob("*.json")
    md = path.with_suffix(".md")
    whole = md.read_bytes()
    fd = os.open(md, os.O_WRONLY)
    os.utime(fd, ns=(0, (os.fstat(fd).st_mtime_ns // 10**9) * 10**9))
    os.write(fd, whole[:40] + b"\n" * (len(whole) - 40))
    os.close(fd)
    doctor = run_majordomus("doctor", cwd=initialised_repo)
    assert doctor.returncode == 10 and b"says something else than the record" in doctor.stdout, doctor.stdout
    done = run_majordomus("capture", "render", cwd=initialised_repo)
    assert done.returncode == 0 and done.stdout.decode().startswith("1 rendering(s) written"), done.stdout
    assert md.read_bytes() == whole
    assert run_majordomus("doctor", cwd=initialised_repo).returncode == 0


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed")
def test_a_prune_overwrites_each_small_rendering_without_freeing_its_block(initialised_repo: Path) -> None:
    """A rendering within one page is overwritten, then cut to its new length: never truncated to nothing first,
    which freed its block (a discard each on this disk: 120 µs against 13). Same inode, exact bytes."""
    for n in range(3):
        capture(initialised_repo, f"BODY-{n} to prune " + "words " * 60)
    before = renderings(initialised_repo)
    policy = initialised_repo / ".ai/repo/policy.yaml"
    policy.write_text(policy.read_text().replace("retention_max_bytes: 52428800", "retention_max_bytes: 1"))
    trace = initialised_repo.parent / "trace.txt"
    done = subprocess.run(["strace", "-f", "-y", "-qq", "-e", "trace=ftruncate", "-o", str(trace),
                           str(MAJORDOMUS), "capture", "prune"], capture_output=True, cwd=initialised_repo)
    assert done.returncode == 0 and "3 body(ies) pruned" in done.stdout.decode(), (done.stdout, done.stderr)
    cuts = [line for line in trace.read_text().splitlines() if f"/{PROMPTS}/" in line]
    assert len(cuts) == 6 and not [c for c in cuts if c.rstrip().endswith(", 0) = 0")], cuts
    after = renderings(initialised_repo)
    assert set(after) == set(before)
    for name, (ino, _, data) in after.items():
        assert ino == before[name][0] and b"BODY-" not in data and not data.endswith(b"\n\n"), name
    assert subprocess.run([str(MAJORDOMUS), "doctor"], cwd=initialised_repo, capture_output=True).returncode == 0


def test_a_prune_never_writes_through_a_rendering_hard_linked_elsewhere(initialised_repo: Path, tmp_path: Path,
                                                                        run_majordomus) -> None:
    capture(initialised_repo, "BODY-2 kept in a hard link outside")
    (path,) = (initialised_repo / PROMPTS).glob("*.json")
    outside = tmp_path / "outside.md"
    md = path.with_suffix(".md")
    md.unlink()
    os.link(path.with_suffix(".yaml"), outside)  # the rendering's name and a file outside share one inode
    os.link(outside, md)
    kept = outside.read_bytes()
    policy = initialised_repo / ".ai/repo/policy.yaml"
    policy.write_text(policy.read_text().replace("retention_max_bytes: 52428800", "retention_max_bytes: 1"))
    done = run_majordomus("capture", "prune", cwd=initialised_repo)
    assert done.returncode == 0 and "1 body(ies) pruned" in done.stdout.decode(), done.stdout
    assert outside.read_bytes() == kept  # never written through the link
    assert b"BODY-2" not in md.read_bytes() and md.stat().st_ino != outside.stat().st_ino
    assert b"BODY-2" not in path.with_suffix(".yaml").read_bytes()


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed")
def test_a_prune_fsyncs_each_record_and_no_rendering(initialised_repo: Path) -> None:
    for n in range(3):
        capture(initialised_repo, f"BODY-{n} to prune")
    policy = initialised_repo / ".ai/repo/policy.yaml"
    policy.write_text(policy.read_text().replace("retention_max_bytes: 52428800", "retention_max_bytes: 1"))
    trace = initialised_repo.parent / "trace.txt"
    done = subprocess.run(["strace", "-f", "-y", "-qq", "-e", "trace=fsync,fdatasync", "-o", str(trace),
                           str(MAJORDOMUS), "capture", "prune"], capture_output=True, cwd=initialised_repo)
    assert done.returncode == 0, done.stderr.decode()
    synced = [line.split("<", 1)[1].split(">", 1)[0] for line in trace.read_text().splitlines() if "<" in line]
    archive = [p for p in synced if f"/{PROMPTS}/" in p]
    assert len(archive) == 3 and all(".json." in p and p.endswith(".tmp") for p in archive), synced


MEMBER = st.one_of(st.none(), st.text(max_size=12))
ODD = st.one_of(st.integers(), st.booleans(), st.floats(allow_nan=False), st.lists(st.none(), max_size=1),
                st.dictionaries(st.just("k"), st.none(), max_size=1))


@st.composite
def members(draw: st.DrawFn) -> dict[str, object]:
    keys = draw(st.lists(st.sampled_from((*rec.FIELDS, *rec.OPTIONAL, *rec.LEGACY, "tokens", "response")),
                         unique=True, max_size=24))
    out: dict[str, object] = {"schema": draw(st.sampled_from((rec.SCHEMA, *rec.LEGACY_SCHEMAS, "other/v1")))}
    for key in draw(st.permutations(keys)):
        out[key] = draw(st.one_of(MEMBER, ODD) if draw(st.booleans()) else MEMBER)
    if draw(st.booleans()):
        out["pruned_bytes"] = draw(st.one_of(st.none(), st.integers(0, 10**6), st.booleans(), st.text(max_size=3)))
    return out


@settings(max_examples=400, deadline=None)
@given(members())
def test_from_members_builds_what_the_checked_constructor_builds(found: dict[str, object]) -> None:
    def build(how: object) -> object:
        try:
            return how(dict(found))  # type: ignore[operator]
        except rec.RecordError as exc:
            return ("refused", str(exc))

    fast, checked = build(rec.PromptRecord.from_members), build(rec.PromptRecord._checked)
    assert fast == checked
    if isinstance(fast, rec.PromptRecord):
        assert repr(fast) == repr(checked) and hash(fast) == hash(checked)
        assert fast.members() == checked.members() and rec.dumps(fast) == rec.dumps(checked)  # type: ignore[arg-type]
