"""Each real client, wired by `capture install`, on a machine where majordomus is missing or broken: the
client answers the person's prompt exactly as if it were not wired (SPEC §7, fail open).

1. The project wired and committed as a person would; 2. one of: a teammate's clone (majordomus not on PATH,
no per-person file), a virtualenv whose interpreter is gone under `majordomus-hook` and `majordomus-mcp`, a
package that fails to import; 3. the client's headless run. Then: it exited 0 with the answer, and what could
be logged is in `.ai/local/hook-failures.log` and doctor's findings.
"""

from __future__ import annotations

import pytest

from real_clients.known import each_client
from real_clients.scenarios import Scenarios

HOW = ("absent", "broken-interpreter", "broken-package")


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("client", each_client())
def test_the_client_answers_when_majordomus_is_missing_or_broken(scenarios: Scenarios, client: str,
                                                                  how: str) -> None:
    run = scenarios.fail_open(client, how)  # raises ClientFailed unless the client answered the prompt
    assert run.sitting.ran.returncode == 0
    assert "majordomus" not in run.sitting.ran.stdout, run.sitting.ran.stdout[-400:]  # nothing of ours shown


@pytest.mark.parametrize("how", ("absent", "broken-interpreter"))
@pytest.mark.parametrize("client", each_client())
def test_a_missing_or_unstartable_majordomus_records_nothing(scenarios: Scenarios, client: str, how: str) -> None:
    run = scenarios.fail_open(client, how)
    assert run.sitting.new_episodes == [] and run.world.prompts() == []


@pytest.mark.parametrize("client", each_client())
def test_a_package_that_will_not_import_is_logged_and_doctor_names_the_repair(scenarios: Scenarios,
                                                                              client: str) -> None:
    run = scenarios.fail_open(client, "broken-package")
    assert run.failures and all("majordomus cannot be imported (ImportError: a half-finished upgrade); "
                                "reinstall it" in line for line in run.failures), run.failures
    found = [f for f in run.doctor if f.get("category") == "hooks" and f.get("level") == "FAIL"]
    assert any("failed open" in str(f.get("message")) for f in found), run.doctor


def test_doctor_says_the_hooks_launcher_will_not_start(scenarios: Scenarios) -> None:
    """Claude Code's per-person file names this machine's launcher and its interpreter by path; doctor sees the
    interpreter gone. (A shared file names it by name, and doctor's PATH has a working one: it cannot see a
    client's PATH.)"""
    run = scenarios.fail_open("claude-code", "broken-interpreter")
    found = [f for f in run.doctor if f.get("category") == "hooks" and f.get("level") == "FAIL"]
    assert any("/broken-venv/bin/python, which is gone" in str(f.get("message")) for f in found), run.doctor
