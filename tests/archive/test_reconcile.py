"""`capture reconcile`: three tiers, the exactly-one-window rule, and links made only on evidence.

Histories are written as the writers write them (open files, working contexts, closed records, prompt
records), so each tier can be given exactly the evidence a test needs.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings

from majordomus.archive import record as rec
from majordomus.archive.reconcile import reconcile
from reconcile_histories import NOW, History, build, histories


def test_tier_1_links_a_prompt_inside_its_open_episode(tmp_path: Path) -> None:
    h = History(tmp_path)
    h.open_episode("s-open", "ps", 100)
    inside, before = h.prompt(200, "ps"), h.prompt(50, "ps")
    result = reconcile(h.layout, now=NOW)
    assert (result.linked, result.unlinked) == (1, 1)
    assert (h.read(inside)["episode"], h.read(inside)["episode_link"]) == ("s-open", "open")
    assert (h.read(before)["episode"], h.read(before)["episode_link"]) == (None, "orphan")


def test_tier_2_holds_the_window_of_each_of_a_sessions_episodes(tmp_path: Path) -> None:
    """A client that resumes a session it ended opens a second episode under the same provider session.

    1. ps opens s-a (100..200), then s-b (300..400); 2. prompts at 150, 250, 350.
    Result: 150 → s-a, 350 → s-b, 250 (between them) stays unlinked: no nearest-in-time guess.
    """
    h = History(tmp_path)
    h.context("s-a", "ps", 100, 200)
    h.context("s-b", "ps", 300, 400)
    a, gap, b = h.prompt(150, "ps"), h.prompt(250, "ps"), h.prompt(350, "ps")
    reconcile(h.layout, now=NOW)
    assert (h.read(a)["episode"], h.read(a)["episode_link"]) == ("s-a", "session-context")
    assert (h.read(b)["episode"], h.read(b)["episode_link"]) == ("s-b", "session-context")
    assert (h.read(gap)["episode"], h.read(gap)["episode_link"]) == (None, "orphan")


def test_two_windows_holding_one_moment_link_neither(tmp_path: Path) -> None:
    h = History(tmp_path)
    h.context("s-a", "ps", 100, 200)
    h.context("s-b", "ps", 200, 300)  # opened the second the first closed
    edge = h.prompt(200, "ps")
    reconcile(h.layout, now=NOW)
    assert h.read(edge)["episode"] is None


def test_a_context_whose_close_was_never_appended_takes_its_closed_records_end(tmp_path: Path) -> None:
    h = History(tmp_path)
    h.context("s-a", "ps", 100, None)
    h.closed_record("s-a", 100, 200)
    inside, after = h.prompt(150, "ps"), h.prompt(250, "ps")
    reconcile(h.layout, now=NOW)
    assert h.read(inside)["episode"] == "s-a" and h.read(after)["episode"] is None


def test_tier_3_links_a_whole_span_inside_exactly_one_unclaimed_closed_episode(tmp_path: Path) -> None:
    h = History(tmp_path)
    h.closed_record("s-lost", 100, 500)  # its working context is gone: only its record remains
    h.closed_record("s-foreign", 100, 500, worktree="f" * 16)  # another worktree's: never a candidate
    first, last = h.prompt(150, "unknown"), h.prompt(450, "unknown")
    result = reconcile(h.layout, now=NOW)
    assert result.linked == 2
    for name in (first, last):
        assert (h.read(name)["episode"], h.read(name)["episode_link"]) == ("s-lost", "ledger")


def test_tier_3_refuses_zero_or_two_candidates_and_spans_that_stick_out(tmp_path: Path) -> None:
    h = History(tmp_path)
    h.closed_record("s-1", 100, 500)
    h.closed_record("s-2", 120, 480)
    both = h.prompt(200, "two-candidates")
    h.closed_record("s-3", 1000, 1100)
    out1, out2 = h.prompt(1050, "sticks-out"), h.prompt(1200, "sticks-out")
    result = reconcile(h.layout, now=NOW)
    assert result.linked == 0 and result.unlinked == 3
    assert all(h.read(n)["episode"] is None for n in (both, out1, out2))


def test_tier_3_never_claims_an_episode_tiers_1_and_2_know(tmp_path: Path) -> None:
    h = History(tmp_path)
    h.context("s-known", "known-ps", 100, 500)
    h.closed_record("s-known", 100, 500)
    stranger = h.prompt(200, "stranger")
    reconcile(h.layout, now=NOW)
    assert h.read(stranger)["episode"] is None


def test_one_episode_that_is_the_only_candidate_of_two_sessions_links_neither(tmp_path: Path) -> None:
    h = History(tmp_path)
    h.closed_record("s-1", 100, 500)
    a, b = h.prompt(200, "ps-a"), h.prompt(300, "ps-b")
    reconcile(h.layout, now=NOW)
    assert h.read(a)["episode"] is None and h.read(b)["episode"] is None


def test_a_made_link_is_never_recomputed(tmp_path: Path) -> None:
    h = History(tmp_path)
    h.context("s-a", "ps", 100, 200)
    kept = h.prompt(500, "ps", link="open", episode="s-elsewhere")  # outside the window, but made at capture
    before = (h.layout.prompts_dir / kept).read_bytes()
    result = reconcile(h.layout, now=NOW)
    assert result.already == 1 and (h.layout.prompts_dir / kept).read_bytes() == before


def test_legacy_records_become_unlinked_legacy_unless_evidence_links_them(tmp_path: Path) -> None:
    h = History(tmp_path)
    h.context("s-a", "ps", 100, 200)
    linked, unlinked = h.prompt(150, "ps", legacy=True), h.prompt(900, "ps", legacy=True)
    dry = reconcile(h.layout, dry_run=True, now=NOW)
    assert (dry.records, dry.linked, dry.already, dry.unlinked) == (2, 1, 0, 1)
    assert "episode_link" not in h.read(linked)  # a dry run writes nothing
    reconcile(h.layout, now=NOW)
    got = h.read(linked)
    assert (got["episode"], got["episode_link"]) == ("s-a", "session-context")
    assert list(got)[:10] == list(rec.FIELDS)[:10] and got["worktree_id"] == h.here
    assert (h.read(unlinked)["episode"], h.read(unlinked)["episode_link"]) == (None, "unlinked-legacy")
    assert (h.layout.prompts_dir / linked.replace(".json", ".md")).is_file()


def test_records_it_cannot_account_for_are_untouched_and_counted(tmp_path: Path) -> None:
    h = History(tmp_path)
    odd = h.layout.prompts_dir / "20260101000000-odd.json"
    odd.write_text('{"schema": "majordomus.capture/v1", "messages": [1, 2]}')
    (h.layout.prompts_dir / "20260101000001-torn.json").write_text('{"schema": "majordomus.capt')
    h.prompt(10, None)
    result = reconcile(h.layout, now=NOW)
    assert (result.records, result.refused, result.unlinked) == (3, 2, 1)
    assert odd.read_text() == '{"schema": "majordomus.capture/v1", "messages": [1, 2]}'
    said = result.sentence(False)
    assert ", 2 refused (this writer cannot account for every member): 20260101000000-odd.json, " \
        "20260101000001-torn.json (the first " in said, said


def test_the_sentences_are_exact() -> None:
    from majordomus.archive.reconcile import Result

    r = Result(records=5, linked=1, already=2, unlinked=2)
    assert r.sentence(True) == ("reconcile --dry-run: 5 record(s); 1 would be linked, 2 already linked, "
                                "2 have no evidence and stay unlinked")
    assert r.sentence(False) == "reconcile: 5 record(s); 1 linked, 2 already linked, 2 unlinked for want of evidence"


# --- the property: random histories never produce a link to an episode that did not contain the prompt --------

@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories())
def test_reconcile_never_links_a_prompt_to_an_episode_that_did_not_contain_it(history: dict) -> None:
    check_history(history)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories(spread=2))
def test_in_a_crowded_second_no_prompt_is_linked_by_a_window_that_only_touches_it(history: dict) -> None:
    """Many opens, closes and prompts in the same few seconds."""
    check_history(history)

def check_history(history: dict) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        h, windows, names = build(Path(tmp), history)
        first = reconcile(h.layout, now=NOW)
        for name, (moment, ps, _) in zip(names, history["prompts"]):
            got = h.read(name)
            assert got["episode_link"] in rec.LINKS
            if got["episode"] is None:
                assert got["episode_link"] in rec.UNLINKED
                continue
            owner, opened, closed = windows[got["episode"]]
            # strictly inside: a prompt in the second its episode opened or closed is not ordered by time alone
            assert opened < moment < closed, (name, got, windows)
            touching = [sid for sid, (p, o, c) in windows.items() if p == owner and o <= moment <= c]
            if got["episode_link"] in ("open", "session-context"):
                assert touching == [got["episode"]], (name, got, windows)  # no other window could hold it
            if got["episode_link"] in ("open", "session-context"):
                assert owner == ps  # tiers 1 and 2 join on the provider session itself
        event("some prompt linked" if first.linked else "nothing linked")
        assert first.records == len(names)
        again = reconcile(h.layout, now=NOW)
        assert again.linked == 0 and again.already == first.already + first.linked
