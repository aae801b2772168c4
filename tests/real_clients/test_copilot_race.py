"""Copilot starts its SessionStart and UserPromptSubmit hooks at the same moment (REAL-CLIENTS.md).

1. The start hook's `git status` slowed by 1.5 s (a `git` first on its PATH that sleeps: a slow disk, a big
repository), so the prompt hook runs while the start is still drawing the episode; 2. `copilot -p`; 3. the
wiring restored, `capture reconcile`.
The prompt belongs to the episode whose start was still running: capture or reconcile must link it (SPEC §5.4).
"""

from __future__ import annotations

from real_clients.scenarios import Scenarios

LINKED = ("open", "session-context", "ledger")


def test_a_slow_session_start_still_opens_the_sittings_one_episode(scenarios: Scenarios) -> None:
    run = scenarios.copilot_race()
    assert [(e.provider, e.closed) for e in run.sitting.new_episodes] == [("copilot", True)]
    assert [p["text"] for p in run.world.prompts()] == [run.sitting.prompt]  # the prompt hook ran too


def test_a_prompt_that_raced_its_session_start_is_linked_to_that_episode(scenarios: Scenarios) -> None:
    run = scenarios.copilot_race()
    episode = run.sitting.new_episodes[0].session_id
    prompts = run.world.prompts()
    assert [p["episode"] for p in prompts] == [episode], (prompts, run.reconciled)
    assert prompts[0]["episode_link"] in LINKED
