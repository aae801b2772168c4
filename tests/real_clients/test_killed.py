"""Each real client killed mid-answer: the fake API stalls after its first event and the test sends SIGTERM
to the client's process group, as closing its terminal does.

1. A headless run on a stalling model API; 2. once the answer has begun and the prompt is archived, SIGTERM
to the process group; 3. where no end came, the day passes (`session.stale_after_hours`) and
`majordomus capture recover` runs. Then: one episode, recorded interrupted; the prompt linked open.
"""

from __future__ import annotations

import pytest

from real_clients.known import each_client
from real_clients.scenarios import Killed, Scenarios

STALE_AFTER_HOURS = 24  # the policy default `majordomus init` writes


def settled(run: Killed) -> list[dict[str, object]]:
    """The killed sitting's record: the client's end, or `capture recover`'s once the episode went stale."""
    world = run.world
    if world.open_files():
        world.age_open_episodes(STALE_AFTER_HOURS + 1)
        world.check_majordomus("capture", "recover")
    ids = {e.session_id for e in run.sitting.new_episodes}
    return [r for r in world.records() if r["session_id"] in ids]


@pytest.mark.parametrize("client", each_client())
def test_a_run_killed_mid_answer_is_one_episode(scenarios: Scenarios, client: str) -> None:
    run = scenarios.killed(client)
    assert [e.provider for e in run.sitting.new_episodes] == [client], run.sitting.new_episodes


@pytest.mark.parametrize("client", each_client())
def test_a_run_killed_mid_answer_is_recorded_interrupted(scenarios: Scenarios, client: str) -> None:
    run = scenarios.killed(client)
    records = settled(run)
    assert [r["outcome"] for r in records] == ["interrupted"], records


@pytest.mark.parametrize("client", each_client())
def test_a_run_killed_mid_answer_records_its_last_turn_running(scenarios: Scenarios, client: str) -> None:
    run = scenarios.killed(client)
    assert [r.get("last_turn") for r in settled(run)] == ["running"]


@pytest.mark.parametrize("client", each_client())
def test_the_prompt_of_a_killed_run_is_linked_open_to_its_episode(scenarios: Scenarios, client: str) -> None:
    run = scenarios.killed(client)
    episode = run.sitting.new_episodes[0].session_id
    assert [(p["episode"], p["episode_link"]) for p in run.world.prompts()] == [(episode, "open")]
