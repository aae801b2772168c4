"""A project wired by `capture install` whose client has not been told to trust it.

Codex runs no project hook until a person reviews each one ("Hooks need review": trust is kept per absolute
path of .codex/hooks.json and per handler hash); Gemini refuses a folder it was never told to trust
(`gemini -p` exits 55). 1. install; 2. `capture status`; 3. one headless run. Status must say `untrusted`,
not `verified`, wherever the client's trust store is a readable file (SPEC §6).
"""

from __future__ import annotations

from real_clients.scenarios import Scenarios, Untrusted

GEMINI_UNTRUSTED_EXIT = 55


def session_state(run: Untrusted, client: str) -> object:
    return next(row["state"] for row in run.status if row["provider"] == client and row["aspect"] == "session")


def test_codex_runs_no_project_hook_until_a_person_reviews_it(scenarios: Scenarios) -> None:
    run = scenarios.untrusted("codex")
    assert run.sitting.ran.returncode == 0, run.sitting.ran.describe()
    assert run.sitting.new_episodes == [] and run.world.prompts() == []


def test_status_says_untrusted_while_codex_would_run_none_of_the_hooks(scenarios: Scenarios) -> None:
    assert session_state(scenarios.untrusted("codex"), "codex") == "untrusted"


def test_gemini_runs_nothing_in_a_folder_it_was_not_told_to_trust(scenarios: Scenarios) -> None:
    run = scenarios.untrusted("gemini")
    assert run.sitting.ran.returncode == GEMINI_UNTRUSTED_EXIT, run.sitting.ran.describe()
    assert run.sitting.new_episodes == [] and run.world.prompts() == []


def test_status_says_untrusted_while_gemini_would_run_none_of_the_hooks(scenarios: Scenarios) -> None:
    assert session_state(scenarios.untrusted("gemini"), "gemini") == "untrusted"
