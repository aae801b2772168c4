"""The two renderings: rebuildable from the record, read back by a real YAML parser, fences that hold."""

from __future__ import annotations

import json
import os
import re
import stat
import time
from pathlib import Path

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from majordomus.archive import record as rec
from majordomus.archive.prune import tombstoned
from majordomus.archive.render import fence, render_md, render_yaml

PROMPTS = Path(".ai/local/prompts")


def sample(text: str | None = "hello", **extra: object) -> rec.PromptRecord:
    return rec.PromptRecord.from_members({
            "schema": rec.SCHEMA, "started_at": "2026-12-02T08:00:00Z", "provider": "claude-code",
            "event": "UserPromptSubmit", "id": "p-1", "session": "ps", "episode": "s-20261202080000-abcd",
            "episode_link": "open", "repository_id": "git@example.com:o/r.git", "worktree_id": "0123456789abcdef",
            "source": None, "cwd": "/w|x`y", "branch": "main", "head": "a" * 40, "text": text, **extra})


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_the_yaml_rendering_reads_back_as_the_record(text: str) -> None:
    record = sample(text)
    back = yaml.safe_load(render_yaml(record, "stem"))
    assert back.pop("record") == "stem.json"
    assert back == record.members()


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from("`a\n ~")))
def test_the_fence_is_longer_than_any_backtick_run_inside(text: str) -> None:
    mark = fence(text)
    runs = [len(m) for m in re.findall("`+", text)]
    assert len(mark) >= 3 and all(len(mark) > r for r in runs)
    md = render_md(sample(text), "stem")
    body = md.split("## PROMPT\n\n", 1)[1]
    assert body.startswith(mark + "\n") and body.endswith("\n" + mark + "\n")
    inner = body[len(mark) + 1: -len(mark) - 1]
    assert inner == (text if text.endswith("\n") else text + "\n")


def test_the_markdown_rendering_has_front_matter_a_table_and_the_prompt() -> None:
    md = render_md(sample("print(`x`)\n```\nnested fence\n```", redacted="assignment"), "20261202080000-x")
    front = yaml.safe_load(md.split("---\n")[1])
    assert front["episode_link"] == "open" and front["record"] == "20261202080000-x.json"
    assert front["redacted"] == "assignment" and "text" not in front
    assert "# Prompt — 2026-12-02 08:00:00 UTC" in md
    assert "| Provider | `claude-code` · `UserPromptSubmit` |" in md
    assert "| Branch | `main` · `aaaaaaa` |" in md
    assert "| Directory | ``/w\\|x`y`` |" in md
    assert "\n````\nprint(`x`)\n```\nnested fence\n```\n````\n" in md


def test_a_pruned_body_shows_the_tombstone_in_both_renderings() -> None:
    pruned = tombstoned(sample("secret plans"), "2026-12-03T00:00:00Z")
    sentence = (f"(the body was pruned by retention on 2026-12-03T00:00:00Z; it was 12 byte(s); sha256 "
                f"{pruned.pruned_sha256})")
    md = render_md(pruned, "s")
    assert sentence in md and "Every other field of this record is unchanged." in md and "secret" not in md
    back = yaml.safe_load(render_yaml(pruned, "s"))
    assert back["text"] is None and back["tombstone"].startswith(sentence)
    assert back["pruned_bytes"] == 12 and len(back["pruned_sha256"]) == 64


def test_render_repairs_modes_over_the_whole_directory_and_writes_missing_renderings(initialised_repo: Path,
                                                                                     run_majordomus) -> None:
    for n in range(3):
        done = run_majordomus("capture", "prompt", "--provider", "claude-code", cwd=initialised_repo,
                              input=json.dumps({"session_id": "s", "prompt": f"prompt {n}"}).encode())
        assert done.returncode == 0
    archive = initialised_repo / PROMPTS
    first = sorted(archive.glob("*.json"))[0]
    first.with_suffix(".md").unlink()
    first.with_suffix(".yaml").unlink()
    for path in archive.iterdir():
        os.chmod(path, 0o644)
    os.chmod(archive, 0o755)
    stale = archive / ".20261202080000-x.json.123.tmp"
    stale.write_text("half a capture")
    os.utime(stale, (time.time() - 3600, time.time() - 3600))
    done = run_majordomus("capture", "render", cwd=initialised_repo)
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().startswith("2 rendering(s) written into .ai/local/prompts; 7 file mode(s) set to 600")
    assert stat.S_IMODE(archive.stat().st_mode) == 0o700
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in archive.iterdir())
    assert first.with_suffix(".md").is_file() and first.with_suffix(".yaml").is_file()
    assert not stale.exists()
    forced = run_majordomus("capture", "render", "--force", cwd=initialised_repo)
    # --force compares every rendering and writes only what differs; these six already agree
    assert forced.returncode == 0 and forced.stdout.decode().startswith("0 rendering(s) written")


def test_render_reformats_an_older_one_line_record_and_refuses_what_it_cannot_account_for(
        initialised_repo: Path, run_majordomus) -> None:
    archive = initialised_repo / PROMPTS
    old = {"schema": "majordomus.prompt/v1", "started_at": "2026-01-01T00:00:00Z", "provider": "claude-code",
           "text": "old one"}
    (archive / "20260101000000-old-one.json").write_text(json.dumps(old))
    (archive / "20260101000001-odd.json").write_text(json.dumps({"schema": rec.SCHEMA, "reply": "model text"}))
    done = run_majordomus("capture", "render", cwd=initialised_repo)
    assert done.returncode == 0
    assert "1 record(s) refused" in done.stdout.decode()
    raw = (archive / "20260101000000-old-one.json").read_bytes()
    assert rec.is_pretty(raw) and json.loads(raw)["text"] == "old one"
    assert (archive / "20260101000000-old-one.md").is_file()
    odd = json.loads((archive / "20260101000001-odd.json").read_text())
    assert odd == {"schema": rec.SCHEMA, "reply": "model text"}
    assert not (archive / "20260101000001-odd.md").exists()


def test_render_refuses_a_symlinked_archive_and_skips_symlinked_records(initialised_repo: Path, run_majordomus,
                                                                        tmp_path: Path) -> None:
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps(sample("outside").members()))
    os.chmod(outside, 0o644)
    archive = initialised_repo / PROMPTS
    (archive / "20261202080000-link.json").symlink_to(outside)
    done = run_majordomus("capture", "render", cwd=initialised_repo)
    assert done.returncode == 0 and "1 symbolic link(s) refused" in done.stdout.decode()
    assert stat.S_IMODE(outside.stat().st_mode) == 0o644 and not (archive / "20261202080000-link.md").exists()
    (archive / "20261202080000-link.json").unlink()
    archive.rmdir()
    archive.symlink_to(tmp_path)
    refused = run_majordomus("capture", "render", cwd=initialised_repo)
    assert refused.returncode == 15 and b"symbolic link" in refused.stderr
