"""Qwen Code (npm @qwen-code/qwen-code), pinned, wired by `majordomus capture install --provider qwen-code` and
run offline against the fake API's chat completions (drivers.Qwen).

What runs here: a one-shot run (`qwen --output-format json "prompt"`) with a credential in its prompt, then
`qwen --resume <session_id>` with a second prompt; one-shot runs stopped mid-answer by SIGTERM, SIGINT (Ctrl-C),
SIGHUP and `kill -9`, and its terminal UI killed by `kill -9`; a run in a folder Qwen Code does not trust once
its folder trust is on; and one-shot runs where majordomus is missing or broken (scenarios.py's three ways, as
test_fail_open.py runs the others). Its terminal UI's other endings run in test_interactive_endings.py (Qwen Code's
rows in endings_observed.yaml).

What Qwen Code 0.24.4 was seen to do: SessionStart (source startup, resume), UserPromptSubmit (prompt, prompt_id)
and Stop fire in a one-shot run as in its terminal UI, but SessionEnd fires only from the terminal UI: a one-shot
run, finished or stopped, ends with no end hook, so the next majordomus command finds the qwen process gone and
records its episode `interrupted`, reason `vanished`, never `closed`.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from real_clients.drivers import QWEN
from real_clients.fake_api import ANSWER, Stall, Text
from real_clients.interactive import PROFILES, ask, start
from real_clients.pinned import Installed
from real_clients.scenarios import FailOpen, Sitting, absent, broken_interpreter, broken_package, require_model_saw, sit
from real_clients.world import ClientFailed, Ran, World, model_texts, wait_until

RFC3339 = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
LEDGER = ".ai/local/state/ledger.jsonl"


@pytest.fixture(scope="module")
def worlds(installed: Installed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    base = tmp_path_factory.mktemp("qwen")
    made: dict[str, object] = {"base": base, "installed": installed}
    yield made
    for value in made.values():
        if isinstance(value, (OneShot, Stopped, Untrusted, FailOpen, Killed)):
            value.world.close()


def new_world(worlds: dict[str, object], name: str) -> World:
    return World(Path(str(worlds["base"])) / name, QWEN, worlds["installed"])  # type: ignore[arg-type]


def ledger(world: World) -> list[dict[str, object]]:
    path = world.repo / LEDGER
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@dataclass(frozen=True)
class OneShot:
    world: World
    first: Sitting
    second: Sitting
    open_after_first: list[dict[str, object]]  # the open files once the first run had exited
    ledger_after_first: list[str]  # the ledger's events then
    records: list[dict[str, object]]  # after both runs and a `majordomus episodes`


def one_shot(worlds: dict[str, object]) -> OneShot:
    """1. `qwen --output-format json "<prompt with a ghp_ token>"`; 2. `qwen --resume <its session_id>` with a
    second prompt; 3. `majordomus --json episodes`, as a person's next command."""
    if "one-shot" not in worlds:
        world = new_world(worlds, "one-shot")
        world.api.script = Text()
        prompt = f"Read README.md and sum it up in one line. The deploy token is {world.credential}, keep it out of it."
        first = sit(world, prompt, QWEN.headless(prompt))
        require_model_saw(first, world.credential)
        if ANSWER not in first.ran.stdout:
            raise ClientFailed(f"the answer never reached stdout: {first.ran.describe()}")
        opened, events = world.open_files(), [str(line["event"]) for line in ledger(world)]
        again = "Now say the same in fewer words."
        second = sit(world, again, QWEN.resume(again, first.ran.stdout, first.ran.stderr))
        require_model_saw(second, again)
        world.check_majordomus("--json", "episodes")
        worlds["one-shot"] = OneShot(world, first, second, opened, events, world.records())
    found = worlds["one-shot"]
    assert isinstance(found, OneShot)
    return found


def test_each_one_shot_run_is_one_episode_of_qwen_code(worlds: dict[str, object]) -> None:
    run = one_shot(worlds)
    for sitting in (run.first, run.second):
        assert [e.provider for e in sitting.new_episodes] == ["qwen-code"], sitting.new_episodes
    assert len({r["session_id"] for r in run.records}) == 2, run.records


def test_a_finished_one_shot_run_fires_no_session_end_and_is_left_open_with_its_turn_completed(
        worlds: dict[str, object]) -> None:
    """Qwen Code 0.24.4 fires Stop when the answer is done and no SessionEnd when the one-shot run then exits."""
    run = one_shot(worlds)
    assert [o["last_turn"] for o in run.open_after_first] == ["completed"], run.open_after_first
    assert run.ledger_after_first == ["session.started"]


def test_the_next_command_records_a_finished_one_shot_run_interrupted_as_its_client_is_gone(
        worlds: dict[str, object]) -> None:
    """No end hook came, but the open file names the qwen process, which has exited: the next majordomus command
    (or the resumed run's own start) ends it `vanished`, keeping its completed last turn; never `closed`."""
    run = one_shot(worlds)
    assert run.world.open_files() == []
    assert [(r["provider"], r["outcome"], r["end_reason"], r["last_turn"]) for r in run.records] == [
        ("qwen-code", "interrupted", "vanished", "completed")] * 2, run.records


def test_the_resumed_run_continues_the_first_runs_session_and_conversation(worlds: dict[str, object]) -> None:
    """`qwen --resume <session_id>` keeps the session id (its SessionStart says source resume) and carries the first
    prompt to the model."""
    run = one_shot(worlds)
    assert any(run.first.prompt.split(run.world.credential)[0] in text for text in model_texts(run.second.ran.requests))
    starts = [line for line in ledger(run.world) if line["event"] == "session.started"]
    assert [line["source"] for line in starts] == ["startup", "resume"], starts
    assert len({line["provider_session"] for line in starts}) == 1, starts
    assert len({p["session"] for p in run.world.prompts()}) == 1


def test_every_prompt_of_a_one_shot_run_is_linked_open_to_its_episode(worlds: dict[str, object]) -> None:
    run = one_shot(worlds)
    prompts = run.world.prompts()
    opening = run.first.prompt.split(run.world.credential)[0]
    first = [p for p in prompts if str(p.get("text") or "").startswith(opening)]
    second = [p for p in prompts if p.get("text") == run.second.prompt]
    assert [(p["episode"], p["episode_link"]) for p in first + second] == [
        (s.new_episodes[0].session_id, "open") for s in (run.first, run.second)], prompts
    assert all(str(p.get("id", "")).startswith(str(p["session"])) for p in prompts), prompts  # its prompt_id


def test_the_credential_of_a_one_shot_run_is_nowhere_under_ai(worlds: dict[str, object]) -> None:
    run = one_shot(worlds)
    assert run.world.places_holding(run.world.credential) == []
    (first,) = [p for p in run.world.prompts() if "[redacted:" in str(p.get("text"))]
    assert first.get("redacted"), first


def test_status_says_verified_and_when_a_real_event_of_qwen_code_last_reached_capture(
        worlds: dict[str, object]) -> None:
    run = one_shot(worlds)
    rows = {row["aspect"]: row for row in run.world.status_rows() if row["provider"] == "qwen-code"}
    assert {aspect: row["state"] for aspect, row in rows.items()} == {"session": "verified", "prompt": "verified"}
    assert all(RFC3339.search(str(row["reason"])) for row in rows.values()), rows


def test_doctor_finds_nothing_to_warn_about_after_one_shot_runs(worlds: dict[str, object]) -> None:
    run = one_shot(worlds)
    assert [f for f in run.world.doctor() if f["level"] in ("WARN", "FAIL")] == []


# ---- stopped mid-answer --------------------------------------------------------------------------------------

# Qwen Code 0.24.4 mid-answer, its one-shot run: each of these ends it at once, and none runs SessionEnd
STOPS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGKILL)


@dataclass(frozen=True)
class Stopped:
    world: World
    sitting: Sitting
    open_when_gone: list[dict[str, object]]  # the open files once qwen and what it started were gone
    records: list[dict[str, object]]  # after `majordomus episodes`


def stopped(worlds: dict[str, object], how: signal.Signals) -> Stopped:
    """A one-shot run whose answer the fake API holds, stopped once the prompt is archived by `how` to its
    process group (a terminal's Ctrl-C is SIGINT, its closing SIGHUP); then `majordomus episodes` reads."""
    key = f"stopped-{how.name}"
    if key not in worlds:
        world = new_world(worlds, key)
        world.api.script = Stall()
        prompt = f"Explain README.md line by line, slowly. The token is {world.credential}."

        def run_and_stop(argv: list[str]) -> Ran:
            started = time.monotonic()
            process, out, err, first = world.start(argv)
            try:
                wait_until(world.api.stalled.is_set, 60, "qwen's model request")
                wait_until(lambda: bool(world.prompts()), 30, "the prompt's record")
            except ClientFailed:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=30)
                raise
            os.killpg(process.pid, how)
            return world.finish(argv, process, out, err, first, started, timeout=60)

        sitting = sit(world, prompt, QWEN.headless(prompt), runner=run_and_stop)
        opened = world.open_files()
        world.check_majordomus("--json", "episodes")
        worlds[key] = Stopped(world, sitting, opened, world.records())
    found = worlds[key]
    assert isinstance(found, Stopped)
    return found


@pytest.mark.parametrize("how", STOPS, ids=lambda how: how.name)
def test_a_one_shot_run_stopped_mid_answer_sends_no_end_and_is_recorded_interrupted(worlds: dict[str, object],
                                                                                   how: signal.Signals) -> None:
    run = stopped(worlds, how)
    assert run.world.api.stalled.is_set() and run.sitting.ran.returncode == -how, run.sitting.ran.describe()
    assert [o["last_turn"] for o in run.open_when_gone] == ["running"], run.open_when_gone  # no end hook came
    assert [(r["provider"], r["outcome"], r["end_reason"], r["last_turn"]) for r in run.records] == [
        ("qwen-code", "interrupted", "vanished", "running")], run.records


@pytest.mark.parametrize("how", STOPS, ids=lambda how: how.name)
def test_a_one_shot_run_stopped_mid_answer_keeps_its_prompt_linked_and_no_credential(worlds: dict[str, object],
                                                                                    how: signal.Signals) -> None:
    run = stopped(worlds, how)
    assert any(run.world.credential in s for s in model_texts(run.sitting.ran.requests))  # it was there to leak
    assert [(p["episode"], p["episode_link"]) for p in run.world.prompts()] == [(run.records[0]["session_id"], "open")]
    assert run.world.places_holding(run.world.credential) == []


@dataclass(frozen=True)
class Killed:
    world: World
    open_when_gone: list[dict[str, object]]
    records: list[dict[str, object]]  # after `majordomus episodes`


# Its terminal UI is two processes: the `qwen` tmux starts relaunches itself as a child node process (with
# --expose-gc), and that child runs the UI and the hooks (the open file's `client:` names it)
TARGETS = ("the-ui-process", "the-launcher")


def killed_in_its_terminal(worlds: dict[str, object], target: str) -> Killed:
    """Its terminal UI (tmux) with a prompt answered, then `kill -9` of `target`; then a majordomus command."""
    key = f"killed-tui-{target}"
    if key not in worlds:
        world = new_world(worlds, key)
        world.api.script = Text()
        profile = PROFILES[QWEN.provider]
        terminal = start(world, profile)
        try:
            ask(world, terminal, f"Sum up README.md. The token is {world.credential}.", False, profile.busy_screen)
            (opened,) = world.open_files()
            ui = int(str(opened["client"]).split("@")[0])
            if ui == terminal.pid:
                raise ClientFailed("qwen ran its hooks from the process tmux started: there is no launcher apart")
            os.kill(ui if target == "the-ui-process" else terminal.pid, signal.SIGKILL)
            terminal.wait_exited(60)
        finally:
            terminal.cleanup()
        still_open = world.open_files()
        world.check_majordomus("--json", "episodes")
        worlds[key] = Killed(world, still_open, world.records())
    found = worlds[key]
    assert isinstance(found, Killed)
    return found


def test_its_terminal_ui_killed_sends_no_end_and_is_recorded_interrupted(worlds: dict[str, object]) -> None:
    """`kill -9` of the process that runs the UI and the hooks leaves it no clean-up: no SessionEnd, and the next
    majordomus command finds it gone."""
    run = killed_in_its_terminal(worlds, "the-ui-process")
    assert [o["last_turn"] for o in run.open_when_gone] == ["completed"], run.open_when_gone
    assert [(r["outcome"], r["end_reason"], r["last_turn"]) for r in run.records] == [
        ("interrupted", "vanished", "completed")], run.records
    assert run.world.places_holding(run.world.credential) == []


def test_its_launcher_killed_leaves_the_ui_its_clean_up_and_its_session_end(worlds: dict[str, object]) -> None:
    """`kill -9` of the `qwen` the terminal started (the launcher): the UI process it relaunched exits by itself
    and runs its clean-up, so SessionEnd prompt_input_exit comes, after a completed turn: `closed`."""
    run = killed_in_its_terminal(worlds, "the-launcher")
    assert run.open_when_gone == []
    assert [(r["outcome"], r["end_reason"], r["last_turn"]) for r in run.records] == [
        ("closed", "prompt_input_exit", "completed")], run.records


# ---- folder trust --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Untrusted:
    world: World
    status: list[dict[str, object]]  # capture status with folder trust on and the folder not trusted
    sitting: Sitting


def untrusted(worlds: dict[str, object]) -> Untrusted:
    """Folder trust turned on in ~/.qwen/settings.json and this folder not in ~/.qwen/trustedFolders.json: status,
    then one one-shot run."""
    if "untrusted" not in worlds:
        world = new_world(worlds, "untrusted")
        settings = world.home / ".qwen/settings.json"
        doc = json.loads(settings.read_text())
        doc["security"]["folderTrust"] = {"enabled": True}
        settings.write_text(json.dumps(doc))
        status = world.status_rows()
        world.api.script = Text()
        prompt = "Sum up README.md in one line."
        worlds["untrusted"] = Untrusted(world, status, sit(world, prompt, QWEN.headless(prompt)))
    found = worlds["untrusted"]
    assert isinstance(found, Untrusted)
    return found


def test_status_says_untrusted_when_qwen_codes_folder_trust_refuses_the_folder(worlds: dict[str, object]) -> None:
    run = untrusted(worlds)
    rows = [row for row in run.status if row["provider"] == "qwen-code"]
    assert {row["state"] for row in rows} == {"untrusted"}, rows
    assert all("trustedFolders.json" in str(row["reason"]) for row in rows), rows


def test_an_untrusted_folder_runs_no_hook_and_qwen_code_answers_all_the_same(worlds: dict[str, object]) -> None:
    """What the untrusted row warns of, as Qwen Code 0.24.4 does it: the answer comes, and no hook ran."""
    run = untrusted(worlds)
    assert run.sitting.ran.returncode == 0 and ANSWER in run.sitting.ran.stdout, run.sitting.ran.describe()
    assert run.sitting.new_episodes == [] and run.world.prompts() == []


# ---- fail open -----------------------------------------------------------------------------------------------

BREAKAGES = {"absent": absent, "broken-interpreter": broken_interpreter, "broken-package": broken_package}


def failing_open(worlds: dict[str, object], how: str) -> FailOpen:
    key = f"fail-open-{how}"
    if key not in worlds:
        worlds[key] = BREAKAGES[how](new_world(worlds, key))  # raises ClientFailed unless qwen answered
    found = worlds[key]
    assert isinstance(found, FailOpen)
    return found


@pytest.mark.parametrize("how", list(BREAKAGES))
def test_qwen_code_answers_when_majordomus_is_missing_or_broken(worlds: dict[str, object], how: str) -> None:
    run = failing_open(worlds, how)
    assert run.sitting.ran.returncode == 0
    # its answer, and nothing of ours on stderr (its JSON lists the project's MCP server `majordomus` as
    # disconnected, as it lists every server it did not start)
    assert json.loads(run.sitting.ran.stdout)[-1]["result"] == ANSWER, run.sitting.ran.describe()
    assert "majordomus" not in run.sitting.ran.stderr, run.sitting.ran.describe()
    if how != "broken-package":
        assert run.sitting.new_episodes == [] and run.world.prompts() == []
    else:  # majordomus-hook started and could not import majordomus: one line per hook run, and doctor says FAIL
        assert run.failures and all("reinstall it" in line for line in run.failures), run.failures
        assert any(f.get("category") == "hooks" and f.get("level") == "FAIL" for f in run.doctor), run.doctor
