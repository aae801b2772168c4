"""`capture reconcile` over a migrated archive: orphan records across many provider sessions, legacy records,
a record in compact JSON, and one session whose whole span tier 3 can link. The orphans stay byte for byte as
they are, the rest become what they became before reconcile decided a waiting record from its first read."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from majordomus.archive import scan
from majordomus.archive.reconcile import reconcile
from reconcile_histories import NOW, History
from support import MAJORDOMUS


def migrated(root: Path) -> tuple[History, dict[str, str]]:
    """(the history, each record's name -> what it should become: 'same', 'legacy', 'tier3', 'pretty')."""
    h = History(root)
    fate: dict[str, str] = {}
    for n in range(300):
        fate[h.prompt(10 + n * 3, f"ps-{n % 30}")] = "same"
    for n in range(5):
        fate[h.prompt(20 + n, f"ps-{n}", legacy=True)] = "legacy"
    h.closed_record("s-closed", 2000, 2100)
    for moment in (2010, 2050, 2090):
        fate[h.prompt(moment, "ps-tier3")] = "tier3"
    fate[h.prompt(3000, None)] = "same"
    compact = h.prompt(3001, "ps-1")
    path = h.layout.prompts_dir / compact
    path.write_bytes(path.read_bytes().replace(b"\n", b"").replace(b'", "', b'","'))
    fate[compact] = "pretty"
    return h, fate


@pytest.mark.parametrize("split", [False, True], ids=["one process", "two processes"])
def test_a_migrated_archive_reconciles_its_orphans_unchanged_and_links_only_on_evidence(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, split: bool) -> None:
    monkeypatch.setattr(scan, "SPLIT_AT", 50 if split else 10**9)
    h, fate = migrated(tmp_path)
    before = {name: (h.layout.prompts_dir / name).read_bytes() for name in fate}
    dry = reconcile(h.layout, dry_run=True, now=NOW)
    assert (dry.records, dry.linked, dry.already, dry.unlinked, dry.changed) == (310, 3, 0, 307, 9)
    assert all((h.layout.prompts_dir / name).read_bytes() == raw for name, raw in before.items())
    done = reconcile(h.layout, now=NOW)
    assert (done.records, done.linked, done.already, done.unlinked, done.changed) == (310, 3, 0, 307, 9)
    for name, becomes in fate.items():
        got = h.read(name)
        if becomes == "same":
            assert (h.layout.prompts_dir / name).read_bytes() == before[name], name
        elif becomes == "legacy":
            assert (got["episode"], got["episode_link"], got["worktree_id"]) == (None, "unlinked-legacy", h.here)
        elif becomes == "tier3":
            assert (got["episode"], got["episode_link"]) == ("s-closed", "ledger")
        else:
            assert (got["episode"], got["episode_link"]) == (None, "orphan")
            assert (h.layout.prompts_dir / name).read_bytes() != before[name]  # written out in the one format
    again = reconcile(h.layout, now=NOW)
    assert (again.linked, again.already, again.unlinked, again.changed) == (0, 3, 307, 0)


def test_the_real_dry_run_over_a_migrated_archive_says_what_it_would_do(initialised_repo: Path) -> None:
    h, _ = migrated(initialised_repo)
    done = subprocess.run([str(MAJORDOMUS), "capture", "reconcile", "--dry-run"], cwd=h.layout.root,
                          capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert b"310 record(s); 3 would be linked, 0 already linked, 307 have no evidence" in done.stdout + done.stderr
