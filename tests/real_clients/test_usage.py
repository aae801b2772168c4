"""What each real client's episodes used, read by majordomus from the client's own record of the conversation.

1. The headless scenario of test_headless.py, the fake model API giving every answer figures of its own (input,
   output with some reasoning, cache reads, and cache writes where the client's API has them); 2. `majordomus
   --json episodes` and `majordomus show` in the world's HOME, where the client wrote its record.
Then: each episode's tokens are exactly the sums of what the fake reported to the conversation requests of its
own sitting (a resumed sitting appends to the first one's file: each episode counts only its window), its model
is the one the client asked, and a price set in the policy gives its cost.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from real_clients.fake_api import Figures, is_side_request
from real_clients.known import each_client
from real_clients.scenarios import Headless, Scenarios, Sitting

KINDS = ("input", "output", "cache_read", "cache_write")


def reported(sitting: Sitting) -> dict[str, int]:
    """What the fake's answers to this sitting's conversation requests reported, summed per kind."""
    figures: list[Figures] = [r.reported for r in sitting.ran.requests
                              if r.reported is not None and not is_side_request(r)]
    assert figures, f"no answer of this sitting reported usage: {sitting.ran.describe()}"
    return {f"{kind}_tokens": sum(getattr(f, kind) for f in figures) for kind in KINDS}


def listed(run: Headless) -> dict[str, dict[str, Any]]:
    done = run.world.check_majordomus("--json", "episodes")
    return {e["id"]: e for e in json.loads(done.stdout)["episodes"]}


def the_episode(sitting: Sitting, client: str) -> str:
    (episode,) = sitting.hook_episodes(client)
    return episode.session_id


@pytest.mark.parametrize("client", each_client())
def test_each_episode_shows_exactly_the_tokens_its_sittings_answers_reported(scenarios: Scenarios,
                                                                             client: str) -> None:
    run = scenarios.headless(client)
    episodes = listed(run)
    for sitting in (run.first, run.second):
        usage = episodes[the_episode(sitting, client)]["usage"]
        assert usage["state"] == "counted", usage
        assert {k: usage[k] for k in reported(sitting)} == reported(sitting), usage


@pytest.mark.parametrize("client", each_client())
def test_each_episode_names_the_model_its_client_asked(scenarios: Scenarios, client: str) -> None:
    run = scenarios.headless(client)
    episodes = listed(run)
    for sitting in (run.first, run.second):
        asked = {str(r.body.get("model") or r.path.split("/models/")[-1].split(":")[0])
                 for r in sitting.ran.requests if r.reported is not None and not is_side_request(r)
                 and isinstance(r.body, dict)}
        usage = episodes[the_episode(sitting, client)]["usage"]
        assert {m["model"] for m in usage["models"]} == asked, (usage, asked)
        assert sum(m["requests"] for m in usage["models"]) == len(
            [r for r in sitting.ran.requests if r.reported is not None and not is_side_request(r)])


@pytest.mark.parametrize("client", each_client())
def test_a_price_in_the_policy_gives_each_episode_its_cost(scenarios: Scenarios, client: str) -> None:
    run = scenarios.headless(client)
    episodes = listed(run)
    models = {m["model"] for e in episodes.values() for m in e["usage"]["models"]}
    policy = run.world.repo / ".ai/repo/policy.yaml"
    before = policy.read_text()
    rows = "".join(f"    {json.dumps(m)}: {{input: 2, output: 10, cache_read: 0.5, cache_write: 3}}\n"
                   for m in sorted(models))
    policy.write_text(before + "usage:\n  prices:\n" + rows)
    try:
        priced = listed(run)
        shown = run.world.check_majordomus("show", the_episode(run.first, client)).stdout
    finally:
        policy.write_text(before)
    for sitting in (run.first, run.second):
        sums = reported(sitting)
        want = (sums["input_tokens"] * 2 + sums["output_tokens"] * 10 + sums["cache_read_tokens"] * 0.5
                + sums["cache_write_tokens"] * 3) / 1_000_000
        usage = priced[the_episode(sitting, client)]["usage"]
        assert usage["cost_usd"] == pytest.approx(want, abs=1e-6), usage
    assert "the policy's price" in shown, shown
