"""`capture prune`: age first, then bytes oldest first; tombstones; never a deleted record file."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

from majordomus.archive import record as rec
from majordomus.archive.prune import Bounds, plan, prune, sentence
from majordomus.archive.scan import scan
from majordomus.layout import Layout

NOW = datetime(2026, 12, 2, 8, 0, 0, tzinfo=timezone.utc)


def write(layout: Layout, days_ago: float, text: str | None, n: int) -> str:
    moment = NOW - timedelta(days=days_ago)
    record = {"schema": rec.SCHEMA, "started_at": moment.strftime("%Y-%m-%dT%H:%M:%SZ"), "provider": "claude-code",
              "event": "UserPromptSubmit", "id": None, "session": "s", "episode": None, "episode_link": "orphan",
              "repository_id": "r", "worktree_id": "w", "source": None, "cwd": None, "branch": "main",
              "head": "NONE", "text": text}
    name = f"{moment:%Y%m%d%H%M%S}-p{n}.json"
    layout.prompts_dir.mkdir(parents=True, exist_ok=True)
    (layout.prompts_dir / name).write_bytes(rec.dumps(rec.PromptRecord.from_members(record)))
    return name


def policy(layout: Layout, days: int, cap: int) -> None:
    layout.policy_file.parent.mkdir(parents=True, exist_ok=True)
    layout.policy_file.write_text(f"prompts:\n  retention_max_days: {days}\n  retention_max_bytes: {cap}\n")
    layout.locks.mkdir(parents=True, exist_ok=True)


def test_age_goes_first_then_the_oldest_bodies_until_the_rest_fit_the_cap() -> None:
    layout = Layout(Path("/nonexistent"))
    entries = []
    from majordomus.archive.scan import Entry

    for n, (days, size) in enumerate([(40, 10), (20, 10), (10, 10), (5, 10), (1, 10)]):
        stamp = (NOW - timedelta(days=days)).strftime("%Y%m%d%H%M%S")
        body = rec.PromptRecord(rec.SCHEMA, text="x" * size)
        entries.append(Entry(f"{stamp}-p{n}.json", layout.prompts_dir, body, None, True))
    result = plan(entries, Bounds(max_days=30, max_bytes=25), NOW)
    assert [n[-7:] for n in result.victims] == ["p0.json", "p1.json", "p2.json"]
    assert result.body_bytes == 50 and result.bytes_left == 20


def test_prune_takes_bodies_keeps_records_and_adds_the_tombstone_fields(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    policy(layout, days=30, cap=10**9)
    old = write(layout, 45, "an old prompt ✓", 1)
    new = write(layout, 2, "a new prompt", 2)
    before = json.loads((layout.prompts_dir / old).read_text())
    result, _ = prune(layout, now=NOW)
    assert result.pruned == 1
    after = json.loads((layout.prompts_dir / old).read_text())
    body = "an old prompt ✓".encode()
    assert after["text"] is None and after["pruned_at"] == "2026-12-02T08:00:00Z"
    assert after["pruned_bytes"] == len(body) and after["pruned_sha256"] == hashlib.sha256(body).hexdigest()
    assert {k: v for k, v in after.items() if not k.startswith("pruned") and k != "text"} == \
        {k: v for k, v in before.items() if k != "text"}
    assert list(after) == [*rec.FIELDS, "pruned_at", "pruned_bytes", "pruned_sha256"]
    assert json.loads((layout.prompts_dir / new).read_text())["text"] == "a new prompt"
    md = (layout.prompts_dir / old.replace(".json", ".md")).read_text()
    assert "(the body was pruned by retention on 2026-12-02T08:00:00Z; it was 17 byte(s); sha256" in md
    again, _ = prune(layout, now=NOW)  # a tombstone is not pruned twice
    assert again.pruned == 0 and sorted(p.name for p in layout.prompts_dir.glob("*.json")) == sorted([old, new])


def test_the_dry_run_writes_nothing_and_says_what_would_go(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    policy(layout, days=30, cap=15)
    names = [write(layout, 3 - n, "x" * 10, n) for n in range(3)]
    before = {n: (layout.prompts_dir / n).read_bytes() for n in names}
    result, limits = prune(layout, dry_run=True, now=NOW)
    assert sentence(result, limits, True) == ("prune --dry-run: 3 record(s), 30 byte(s) of body; 2 would be pruned, "
                                              "leaving 10 byte(s) (cap 15, 30 day(s))")
    assert {n: (layout.prompts_dir / n).read_bytes() for n in names} == before
    real, limits = prune(layout, now=NOW)
    assert sentence(real, limits, False) == ("prune: 3 record(s); 2 body(ies) pruned, 10 byte(s) left of cap 15, "
                                             "older than 30 day(s) taken")
    assert [json.loads((layout.prompts_dir / n).read_text())["text"] for n in names] == [None, None, "x" * 10]


def test_records_it_cannot_account_for_are_left_untouched(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    policy(layout, days=1, cap=10**9)
    write(layout, 5, "old", 1)
    odd = layout.prompts_dir / "20200101000000-odd.json"
    odd.write_text('{"schema": "majordomus.capture/v1", "text": "old", "transcript": "x"}')
    result, limits = prune(layout, now=NOW)
    assert result.refused == 1 and result.pruned == 1
    assert odd.read_text().endswith('"transcript": "x"}')
    said = sentence(result, limits, False)
    assert said.endswith(", 1 refused (this writer cannot account for every member): 20200101000000-odd.json "
                         "(the first " + str(result.refused_files.problem) + ")"), said
    assert "transcript" in said  # why: the member this writer cannot account for


def test_a_policy_that_does_not_parse_refuses_with_10_naming_the_file(initialised_repo: Path, run_majordomus) -> None:
    (initialised_repo / ".ai/repo/policy.yaml").write_text("prompts: [unclosed\n")
    done = run_majordomus("capture", "prune", cwd=initialised_repo)
    assert done.returncode == 10 and b".ai/repo/policy.yaml does not parse" in done.stderr
    (initialised_repo / ".ai/repo/policy.yaml").write_text("prompts:\n  retention_max_days: -3\n")
    bad = run_majordomus("capture", "prune", "--dry-run", cwd=initialised_repo)
    assert bad.returncode == 10 and b"prompts.retention_max_days" in bad.stderr


def test_the_cli_prunes_and_appends_one_ledger_line(initialised_repo: Path, run_majordomus) -> None:
    layout = Layout(initialised_repo)
    (initialised_repo / ".ai/repo/policy.yaml").write_text("prompts:\n  retention_max_days: 30\n"
                                                          "  retention_max_bytes: 1000000\n")
    write(layout, 400, "a year-old prompt", 1)
    done = run_majordomus("capture", "prune", cwd=initialised_repo)
    assert done.returncode == 0 and done.stdout.decode().startswith("prune: 1 record(s); 1 body(ies) pruned")
    events = [json.loads(line) for line in layout.ledger_file.read_text().splitlines()]
    pruned = [e for e in events if e["event"] == "prompts.pruned"]
    assert len(pruned) == 1 and pruned[0]["pruned"] == 1 and pruned[0]["records"] == 1
    assert len(scan(layout)) == 1


def test_prune_and_reconcile_name_the_records_they_refuse(initialised_repo: Path, run_majordomus) -> None:
    """Not only a count: the first files refused, and why, through the real commands."""
    layout = Layout(initialised_repo)
    policy(layout, days=1, cap=10**9)
    write(layout, 5, "old", 1)
    odd = layout.prompts_dir / "20200101000000-odd.json"
    odd.write_text('{"schema": "majordomus.capture/v1", "text": "old", "transcript": "x"}')
    (layout.prompts_dir / "20200101000001-torn.json").write_text('{"schema": "majordomus.capt')
    for args in (("capture", "prune", "--dry-run"), ("capture", "reconcile", "--dry-run"), ("capture", "prune")):
        done = run_majordomus("--json", *args, cwd=initialised_repo)
        assert done.returncode == 0, done.stderr
        said = json.loads(done.stdout)
        assert said["refused"] == 2 and said["refused_first"] == ["20200101000000-odd.json",
                                                                  "20200101000001-torn.json"], said
        assert "2 refused (this writer cannot account for every member): 20200101000000-odd.json, " \
               "20200101000001-torn.json (the first " in said["message"], said
    assert odd.read_text().endswith('"transcript": "x"}')  # refused: never rewritten
