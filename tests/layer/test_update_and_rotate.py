"""`update` converges and never removes; `history --rotate` archives and never deletes."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import yaml


def test_update_restores_what_is_missing_and_repairs_modes(initialised_repo: Path, run_majordomus) -> None:
    shutil.rmtree(initialised_repo / ".ai/local/session-contexts")
    os.chmod(initialised_repo / ".ai/local/prompts", 0o755)
    (initialised_repo / ".ai/local/prompts/20261202080000-x.json").write_text("{}")
    os.chmod(initialised_repo / ".ai/local/prompts/20261202080000-x.json", 0o644)
    done = run_majordomus("update", cwd=initialised_repo)
    assert done.returncode == 0, done.stderr
    assert (initialised_repo / ".ai/local/session-contexts").is_dir()
    assert stat.S_IMODE((initialised_repo / ".ai/local/prompts").stat().st_mode) == 0o700
    assert stat.S_IMODE((initialised_repo / ".ai/local/prompts/20261202080000-x.json").stat().st_mode) == 0o600
    again = run_majordomus("update", cwd=initialised_repo)
    assert again.stdout.decode().strip() == "layer up to date"


def test_update_adds_missing_policy_keys_inside_their_block_and_keeps_the_persons_values(
        initialised_repo: Path, run_majordomus) -> None:
    policy = initialised_repo / ".ai/repo/policy.yaml"
    policy.write_text("# ours\nprompts:\n  retention_max_days: 7\n")
    done = run_majordomus("update", cwd=initialised_repo)
    assert done.returncode == 0, done.stderr
    text = policy.read_text()
    parsed = yaml.safe_load(text)
    assert text.startswith("# ours\n") and text.count("prompts:") == 1
    assert parsed["prompts"] == {"retention_max_days": 7, "retention_max_bytes": 52428800}
    assert parsed["episodes"] == {"reattach_grace_seconds": 900, "stateless_ttl_seconds": 120}
    assert parsed["session"] == {"stale_after_hours": 24} and parsed["ledger"] == {"retention_max_lines": 5000}


def test_update_on_no_layer_names_init(git_repo: Path, run_majordomus) -> None:
    done = run_majordomus("update", cwd=git_repo)
    assert done.returncode == 12 and b"majordomus init" in done.stderr


def test_init_writes_the_declared_defaults(initialised_repo: Path) -> None:
    parsed = yaml.safe_load((initialised_repo / ".ai/repo/policy.yaml").read_text())
    assert parsed == {"prompts": {"retention_max_days": 90, "retention_max_bytes": 52428800},
                      "episodes": {"reattach_grace_seconds": 900, "stateless_ttl_seconds": 120},
                      "session": {"stale_after_hours": 24}, "ledger": {"retention_max_lines": 5000}}


def test_history_rotate_keeps_the_newest_lines_and_archives_the_rest(initialised_repo: Path, run_majordomus) -> None:
    policy = initialised_repo / ".ai/repo/policy.yaml"
    policy.write_text(policy.read_text().replace("retention_max_lines: 5000", "retention_max_lines: 3"))
    for i in range(4):
        for event, extra in (("start", {}), ("end", {"reason": "logout"})):
            run_majordomus("capture", "session", "--provider", "claude-code", "--event", event, cwd=initialised_repo,
                           input=json.dumps({"session_id": f"h{i}", **extra}).encode())
    ledger = initialised_repo / ".ai/local/state/ledger.jsonl"
    before = ledger.read_text().splitlines()
    assert len(before) == 8
    done = run_majordomus("history", "--rotate", cwd=initialised_repo)
    assert done.returncode == 0, done.stderr
    (archive,) = (initialised_repo / ".ai/local/state").glob("ledger.*.jsonl.archived")
    after = ledger.read_text().splitlines()
    assert archive.read_text().splitlines() == before[:5]
    assert after[:3] == before[5:] and json.loads(after[3])["event"] == "ledger.rotated"
    assert stat.S_IMODE(archive.stat().st_mode) == 0o600


def test_history_without_rotate_is_a_usage_error(initialised_repo: Path, run_majordomus) -> None:
    done = run_majordomus("history", cwd=initialised_repo)
    assert done.returncode == 2 and done.stderr.startswith(b"majordomus: history:")
