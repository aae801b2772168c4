"""A headless run of each real client with a credential in the prompt, then a resumed second run.

1. `majordomus init`, `majordomus capture install --provider <client>`, the client's trust given as a person
   gives it; 2. the client's headless command with a prompt holding a `ghp_` token; 3. the client's resume
   command with a second prompt. Then: what `.ai/` holds, what status and doctor say.
"""

from __future__ import annotations

import re

import pytest

from real_clients.known import each_client
from real_clients.scenarios import Scenarios
from real_clients.world import model_texts

RFC3339 = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


@pytest.mark.parametrize("client", each_client())
def test_each_headless_sitting_is_one_episode_of_the_client(scenarios: Scenarios, client: str) -> None:
    run = scenarios.headless(client)
    for sitting in (run.first, run.second):
        assert [(e.provider, e.closed) for e in sitting.new_episodes] == [(client, True)], sitting.new_episodes
    assert run.world.open_files() == []


@pytest.mark.parametrize("client", each_client())
def test_a_headless_run_that_finished_is_recorded_closed(scenarios: Scenarios, client: str) -> None:
    run = scenarios.headless(client)
    outcomes = [(e.data["outcome"], e.data["end_reason"]) for s in (run.first, run.second) for e in s.new_episodes]
    assert [outcome for outcome, _ in outcomes] == ["closed", "closed"], outcomes


@pytest.mark.parametrize("client", each_client())
def test_a_headless_run_that_finished_records_its_last_turn_completed(scenarios: Scenarios, client: str) -> None:
    run = scenarios.headless(client)
    assert [e.data.get("last_turn") for s in (run.first, run.second) for e in s.new_episodes] == ["completed"] * 2


@pytest.mark.parametrize("client", each_client())
def test_the_resumed_run_continues_the_first_runs_conversation(scenarios: Scenarios, client: str) -> None:
    run = scenarios.headless(client)
    assert any(run.first.prompt in text for text in model_texts(run.second.ran.requests))
    sessions = {p["session"] for p in run.world.prompts()}
    assert len(sessions) == 1, sessions  # one provider session, resumed


@pytest.mark.parametrize("client", each_client())
def test_every_prompt_is_linked_open_to_the_episode_of_its_sitting(scenarios: Scenarios, client: str) -> None:
    run = scenarios.headless(client)
    prompts = run.prompt_records()
    expected = [(s.new_episodes[0].session_id, "open") for s in (run.first, run.second)]
    assert [(p["episode"], p["episode_link"]) for p in prompts] == expected, prompts


@pytest.mark.parametrize("client", each_client())
def test_the_credential_is_nowhere_under_ai_nor_in_any_file_name(scenarios: Scenarios, client: str) -> None:
    run = scenarios.headless(client)
    assert any(run.world.credential in text for text in model_texts(run.first.ran.requests))  # it was there to leak
    assert run.world.places_holding(run.world.credential) == []
    first = run.prompt_records()[0]
    assert "[redacted:" in str(first["text"]) and first.get("redacted"), first


@pytest.mark.parametrize("client", each_client())
def test_status_says_verified_for_both_aspects_of_the_client(scenarios: Scenarios, client: str) -> None:
    run = scenarios.headless(client)
    states = {row["aspect"]: row["state"] for row in run.world.status_rows() if row["provider"] == client}
    assert states == {"session": "verified", "prompt": "verified"}


@pytest.mark.parametrize("client", each_client())
def test_status_says_when_a_real_event_of_the_client_last_reached_capture(scenarios: Scenarios, client: str) -> None:
    run = scenarios.headless(client)
    reasons = [row["reason"] for row in run.world.status_rows() if row["provider"] == client]
    assert reasons and all(RFC3339.search(str(reason)) for reason in reasons), reasons


@pytest.mark.parametrize("client", each_client())
def test_doctor_finds_nothing_to_warn_about_after_headless_sittings(scenarios: Scenarios, client: str) -> None:
    run = scenarios.headless(client)
    assert [f for f in run.world.doctor() if f["level"] in ("WARN", "FAIL")] == []


@pytest.mark.parametrize("client", each_client())
def test_a_sitting_that_compacted_nothing_counts_no_compaction(scenarios: Scenarios, client: str) -> None:
    run = scenarios.headless(client)
    assert [e.data["compactions"] for s in (run.first, run.second) for e in s.new_episodes] == [0, 0]


def test_codex_says_nothing_is_deprecated_in_the_configuration_install_wrote(scenarios: Scenarios) -> None:
    run = scenarios.headless("codex")
    said = [line for s in (run.first, run.second) for line in s.ran.stderr.splitlines() if "deprecated" in line]
    assert said == []
