"""Doctor and `capture render` stat less and hash faster over the archive, and still see everything.

Doctor now takes a record's mode from the fd its read opens (no stat by name of its own), a rendering's existence
and fingerprint from one table of the listing, and hashes with OpenSSL's SHA-256; `capture render` takes the
renderings' fingerprints from the stat its mode repair already makes. What each must still see, through the real
executables: a record or a rendering readable beyond its owner, a symlink under a record's or a rendering's
name, a missing rendering, a rendering that says something else than its record (edited, or a rewrite's); and
render repairs them all.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from majordomus.archive.render import fingerprint
from support import capture_prompt as capture

PROMPTS = ".ai/local/prompts"


def records(repo: Path) -> list[Path]:
    return sorted((repo / PROMPTS).glob("*.json"))


def test_doctor_sees_a_wide_record_a_wide_rendering_and_render_narrows_both(initialised_repo: Path,
                                                                            run_majordomus) -> None:
    for n in range(3):
        capture(initialised_repo, f"prompt number {n}")
    first, second, _ = records(initialised_repo)
    assert run_majordomus("doctor", cwd=initialised_repo).returncode == 0
    os.chmod(first, 0o644)  # a record: its mode now comes from the fd doctor reads it through
    os.chmod(second.with_suffix(".yaml"), 0o640)
    doctor = run_majordomus("doctor", cwd=initialised_repo)
    assert doctor.returncode == 10, doctor.stdout
    assert b"2 file(s) in the prompt archive are readable beyond their owner" in doctor.stdout, doctor.stdout
    done = run_majordomus("capture", "render", cwd=initialised_repo)
    assert done.returncode == 0 and b"2 file mode(s) set to 600" in done.stdout, done.stdout
    assert (os.stat(first).st_mode & 0o777, os.stat(second.with_suffix(".yaml")).st_mode & 0o777) == (0o600, 0o600)
    assert run_majordomus("doctor", cwd=initialised_repo).returncode == 0


def test_doctor_counts_symlinks_under_a_record_s_and_a_rendering_s_name(initialised_repo: Path, tmp_path: Path,
                                                                        run_majordomus) -> None:
    for n in range(2):
        capture(initialised_repo, f"prompt number {n}")
    first, second = records(initialised_repo)
    outside = tmp_path / "outside.json"
    outside.write_bytes(first.read_bytes())
    (first.parent / "20990101000000-linked.json").symlink_to(outside)  # a record's name, the listing's type says
    md = second.with_suffix(".md")
    target = tmp_path / "outside.md"
    target.write_bytes(md.read_bytes())
    md.unlink()
    md.symlink_to(target)
    doctor = run_majordomus("doctor", cwd=initialised_repo)
    out = doctor.stdout.decode()
    assert doctor.returncode == 10, out
    assert "2 symbolic link(s) in the archive" in out, out
    assert "20990101000000-linked.json (the first is a symbolic link)" in out, out
    assert f"1 record(s) have a rendering that says something else than the record (a rewrite was cut short; it " \
           f"may still show a pruned body): {second.name}" in out, out
    render = run_majordomus("capture", "render", cwd=initialised_repo)
    assert render.returncode == 0 and b"symbolic link(s) refused" in render.stdout, render.stdout
    assert md.is_symlink() and target.read_bytes() == md.read_bytes()  # never written through


def test_doctor_names_a_missing_and_an_edited_rendering_and_render_repairs_both(initialised_repo: Path,
                                                                              run_majordomus) -> None:
    for n in range(3):
        capture(initialised_repo, f"prompt number {n}")
    first, second, third = records(initialised_repo)
    first.with_suffix(".md").unlink()
    yml = second.with_suffix(".yaml")
    yml.write_bytes(yml.read_bytes().replace(b"prompt number 1", b"prompt number X"))  # a new mtime: no fingerprint
    doctor = run_majordomus("doctor", cwd=initialised_repo)
    out = doctor.stdout.decode()
    assert doctor.returncode == 10, out
    assert f"1 record(s) lack a rendering (.md or .yaml): {first.name}" in out, out
    assert f"says something else than the record (a rewrite was cut short; it may still show a pruned body): " \
           f"{second.name}" in out, out
    assert third.name not in out
    done = run_majordomus("capture", "render", cwd=initialised_repo)
    assert done.returncode == 0 and done.stdout.decode().startswith("2 rendering(s) written"), done.stdout
    assert b"prompt number 1" in yml.read_bytes() and first.with_suffix(".md").is_file()
    assert yml.stat().st_mtime_ns % 10**9 == fingerprint(second.read_bytes())
    assert run_majordomus("doctor", cwd=initialised_repo).returncode == 0
    again = run_majordomus("capture", "render", cwd=initialised_repo)
    assert again.stdout.decode().startswith("0 rendering(s) written"), again.stdout


@given(st.binary(max_size=4096))
def test_the_fast_fingerprint_is_the_hook_s(data: bytes) -> None:
    assert fingerprint(data, hashlib.sha256) == fingerprint(data)
