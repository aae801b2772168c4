"""The Cline CLI, pinned, wired by `majordomus capture install --provider cline` and run offline.

What runs: a headless run (`cline --json "task"`) and an
MCP sitting with majordomus in Cline's own MCP settings file. What cannot run offline here is skipped with the
reason: the resumed run and the interactive exit live only in Cline's terminal UI, and a run killed mid-answer
did not exit.

Cline runs its hook files detached (fire and forget, output ignored, outside the client's process group), so a
test waits for what they write rather than for the client's exit.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from real_clients.cline import CLINE
from real_clients.fake_api import Stall, Text
from real_clients.pinned import Installed
from real_clients.scenarios import Mcp, Sitting, mcp, sit
from real_clients.world import VENV_BIN, ClientFailed, World, model_texts, wait_until

TUI_ONLY = ("cline 3.0.65 resumes a session only in its interactive terminal UI (`--id` sets interactive mode and "
            "refuses to run without a TTY on stdin and stdout: 'interactive mode requires a TTY'), and that UI, "
            "driven through a bare pseudo-terminal, did not take typed input here; so {what} cannot be run "
            "headless and offline by this test")


@dataclass(frozen=True)
class Headless:
    world: World
    sitting: Sitting
    history: list[dict[str, object]]  # `cline history --json` after the run


@dataclass(frozen=True)
class Killed:
    world: World
    sitting: Sitting


def settle_hooks(world: World, done: object, seconds: float = 30) -> None:
    wait_until(lambda: bool(done if not callable(done) else done()), seconds, "Cline's detached hooks' writes")


@pytest.fixture(scope="module")
def worlds(installed: Installed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    base = tmp_path_factory.mktemp("cline")
    made: dict[str, object] = {"base": base, "installed": installed}
    yield made
    for value in made.values():
        if isinstance(value, (Headless, Killed, Mcp)):
            value.world.close()


def headless_run(worlds: dict[str, object]) -> Headless:
    if "headless" not in worlds:
        world = World(Path(str(worlds["base"])) / "headless", CLINE, worlds["installed"])  # type: ignore[arg-type]
        world.api.script = Text()
        prompt = f"Read README.md and sum it up in one line. The deploy token is {world.credential}, keep it out of it."
        sitting = sit(world, prompt, CLINE.headless(prompt))
        if not any(world.credential in s for s in model_texts(sitting.ran.requests)):
            raise ClientFailed(f"the fake model API never received the prompt: {sitting.ran.describe()}")
        settle_hooks(world, lambda: any(o.get("last_turn") == "completed" for o in world.open_files()))
        history = subprocess.run(world.executable([CLINE.command, "history", "--json"]), cwd=world.repo,
                                 env=world.env(), capture_output=True, text=True, timeout=60, check=True)
        worlds["headless"] = Headless(world, sitting, json.loads(history.stdout))
    found = worlds["headless"]
    assert isinstance(found, Headless)
    return found


def killed_run(worlds: dict[str, object]) -> Killed:
    if "killed" not in worlds:
        world = World(Path(str(worlds["base"])) / "killed", CLINE, worlds["installed"])  # type: ignore[arg-type]
        world.api.script = Stall()
        argv = CLINE.headless("Explain README.md line by line, slowly.")

        def run_and_kill(argv: list[str]) -> object:
            started = time.monotonic()
            process, out, err, first = world.start(argv)
            wait_until(lambda: world.api.stalled.is_set(), 60, "cline's model request")
            wait_until(lambda: bool(world.open_files()), 30, "the episode's open file")
            os.kill(process.pid, signal.SIGTERM)  # the `cline` a person started (kill <pid>)
            return world.finish(argv, process, out, err, first, started, timeout=60)

        sitting = sit(world, "", argv, runner=run_and_kill)  # type: ignore[arg-type]
        settle_hooks(world, lambda: not world.open_files())
        worlds["killed"] = Killed(world, Sitting(sitting.ran.argv[-1], sitting.ran, world.episodes()))
    found = worlds["killed"]
    assert isinstance(found, Killed)
    return found


def test_a_headless_run_is_one_episode_of_cline_under_its_session_id(worlds: dict[str, object]) -> None:
    run = headless_run(worlds)
    episodes = run.world.episodes()
    assert [e.provider for e in episodes] == ["cline"], episodes
    (session,) = run.history
    assert episodes[0].provider_session == session["sessionId"]  # what `cline --id` resumes


def test_a_finished_headless_run_records_its_turn_completed_and_is_left_open(worlds: dict[str, object]) -> None:
    """Cline 3.0.65 fires TaskComplete when the run completed and no end hook at all when the process then exits,
    so the episode stays open (recover closes it) with its last turn completed."""
    run = headless_run(worlds)
    (opened,) = run.world.open_files()
    assert opened["last_turn"] == "completed"


def test_recover_closes_a_finished_headless_run_once_it_is_stale(worlds: dict[str, object]) -> None:
    run = headless_run(worlds)
    run.world.age_open_episodes(hours=30)
    run.world.check_majordomus("capture", "recover")
    assert run.world.open_files() == []
    (record,) = run.world.records()
    assert record["provider"] == "cline" and record["outcome"] == "interrupted", record
    assert record["last_turn"] == "completed", record


def test_the_headless_prompt_is_not_archived_because_cline_fires_no_prompt_hook_for_it(
        worlds: dict[str, object]) -> None:
    """UserPromptSubmit fires only for a message added to a running session, not for a headless task's prompt."""
    run = headless_run(worlds)
    assert run.world.prompts() == []


def test_the_credential_in_the_prompt_is_nowhere_under_ai(worlds: dict[str, object]) -> None:
    run = headless_run(worlds)
    assert run.world.places_holding(run.world.credential) == []


def test_status_says_verified_and_that_a_real_event_reached_capture(worlds: dict[str, object]) -> None:
    run = headless_run(worlds)
    rows = {row["aspect"]: row for row in run.world.status_rows() if row["provider"] == "cline"}
    assert rows["session"]["state"] == "verified" and rows["prompt"]["state"] == "verified"
    assert "last real event here" in str(rows["session"]["reason"]), rows["session"]
    assert "MCP server is not wired by install" in str(rows["session"]["reason"])


KILL_HANGS = ("cline 3.0.65, its model answer stalled mid-stream by the fake API, did not exit within 60 s of SIGTERM "
              "(sent to the `cline` process, and to its whole process group), so a killed run cannot be driven to "
              "its end here; a SIGTERM probe outside a stall fired SessionShutdown with no reason")


@pytest.mark.skip(reason=KILL_HANGS)
def test_a_run_killed_mid_answer_is_closed_interrupted_by_its_session_shutdown(worlds: dict[str, object]) -> None:
    run = killed_run(worlds)
    assert run.world.open_files() == []
    (record,) = run.world.records()
    assert record["provider"] == "cline"
    assert record["outcome"] == "interrupted" and record["end_reason"] == "session_shutdown", record
    assert record.get("last_turn") in (None, "none", "running"), record


@pytest.mark.skip(reason=KILL_HANGS)
def test_a_killed_run_leaves_no_credential_and_no_prompt_record(worlds: dict[str, object]) -> None:
    run = killed_run(worlds)
    assert run.world.prompts() == []
    assert run.world.places_holding(run.world.credential) == []


@pytest.mark.skip(reason=TUI_ONLY.format(what="the resumed run"))
def test_a_resumed_run_continues_the_same_episode() -> None:
    raise AssertionError("not reached")


@pytest.mark.skip(reason=TUI_ONLY.format(what="the interactive exit (/exit, /quit)"))
def test_the_interactive_exit_closes_the_episode() -> None:
    raise AssertionError("not reached")


def mcp_run(worlds: dict[str, object]) -> Mcp:
    if "mcp" not in worlds:
        world = World(Path(str(worlds["base"])) / "mcp", CLINE, worlds["installed"])  # type: ignore[arg-type]
        CLINE.add_mcp_server(world.home, str(VENV_BIN / "majordomus-mcp"))
        worlds["mcp"] = mcp(world)
        settle_hooks(world, lambda: any(o.get("last_turn") == "completed" for o in world.open_files()))
    found = worlds["mcp"]
    assert isinstance(found, Mcp)
    return found


def test_an_mcp_sitting_attaches_and_its_answer_comes_back_to_the_model(worlds: dict[str, object]) -> None:
    run = mcp_run(worlds)
    assert run.external_id in run.answer


def test_an_mcp_sitting_is_one_episode_of_cline(worlds: dict[str, object]) -> None:
    """Cline names itself `@cline/core` in initialize and spawns the server from the cline process that runs its
    hooks, so the attach joins the hook episode instead of opening a connection episode beside it."""
    run = mcp_run(worlds)
    assert [e.provider for e in run.world.episodes()] == ["cline"], run.world.episodes()
    assert f"episode {run.world.episodes()[0].session_id} of cline" in run.answer, run.answer
