"""The Cline CLI, pinned, wired by `majordomus capture install --provider cline` and run offline.

What runs: a headless run (`cline --json "task"`), an MCP sitting with majordomus in Cline's own MCP settings
file, and sittings in its terminal UI (tmux, terminal.py) ended each way a person ends one (interactive.end; the
rows are Cline's in endings_observed.yaml) and resumed with `cline --id`, and a headless run stopped
mid-answer (Ctrl-C, `kill -9`). SIGTERM mid-answer is not run: the CLI did not exit on it.

Cline runs its hook files detached (fire and forget, output ignored, in a session of their own but still its
children), so a test waits for what they write rather than for the client's exit.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from real_clients.cline import CLINE
from real_clients.fake_api import ANSWER, Request, Stall, Text
from real_clients.interactive import Profile, end, gone_after_the_late_end, observed
from real_clients.pinned import Installed
from real_clients.scenarios import Mcp, Sitting, mcp, sit
from real_clients.terminal import Terminal
from real_clients.world import VENV_BIN, ClientFailed, Ran, World, model_texts, wait_until


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


def killed_run(worlds: dict[str, object], how: signal.Signals) -> Killed:
    """A headless run stopped mid-answer (the fake API holds the answer) by `how`, sent to its process group as a
    terminal sends Ctrl-C (SIGINT) or as `kill -9` does; then `majordomus episodes` reads, as a next command would."""
    key = f"killed-{how.name}"
    if key not in worlds:
        world = World(Path(str(worlds["base"])) / key, CLINE, worlds["installed"])  # type: ignore[arg-type]
        world.api.script = Stall()
        argv = CLINE.headless(f"Explain README.md line by line, slowly. The token is {world.credential}.")

        def run_and_kill(argv: list[str]) -> Ran:
            started = time.monotonic()
            process, out, err, first = world.start(argv)
            wait_until(world.api.stalled.is_set, 60, "cline's model request")
            wait_until(lambda: bool(world.open_files()), 30, "the episode's open file")
            os.killpg(process.pid, how)
            return world.finish(argv, process, out, err, first, started, timeout=30)

        sitting = sit(world, argv[-1], argv, runner=run_and_kill)
        if how == signal.SIGINT:
            settle_hooks(world, lambda: not world.open_files())  # its SessionShutdown hook, detached
        world.check_majordomus("--json", "episodes")
        worlds[key] = Killed(world, sitting)
    found = worlds[key]
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
    so the episode is still open, its last turn completed, until a majordomus command reads it."""
    run = headless_run(worlds)
    (opened,) = run.world.open_files()
    assert opened["last_turn"] == "completed"


def test_the_next_command_records_a_finished_headless_run_closed_as_clines_session_file_says_completed(
        worlds: dict[str, object]) -> None:
    """No end hook came, but the open file names the cline process, which has exited, and Cline's own session file
    says status completed, exit_code 0, with the ended_at of this run: the next majordomus command that reads the
    episodes closes it in Cline's word, with both pieces of evidence."""
    run = headless_run(worlds)
    run.world.check_majordomus("--json", "episodes")
    assert run.world.open_files() == []
    (record,) = run.world.records()
    assert record["provider"] == "cline", record
    assert (record["outcome"], record["end_reason"], record["last_turn"]) == ("closed", "completed", "completed")
    assert "is gone; its session file says status completed, exit_code 0" in str(record["end_evidence"]), record


def test_the_headless_prompt_is_archived_redacted_and_joined_to_its_episode(worlds: dict[str, object]) -> None:
    """Cline fires no UserPromptSubmit for a task's prompt and its TaskStart payload carries none; the start hook
    reads it from Cline's session file, where it is before TaskStart runs."""
    run = headless_run(worlds)
    (prompt,) = run.world.prompts()
    (episode,) = run.world.episodes()
    (session,) = run.history
    assert (prompt["event"], prompt["session"], prompt["episode"], prompt["episode_link"]) == (
        "TaskStart", session["sessionId"], episode.session_id, "open"), prompt
    assert str(prompt["text"]).startswith("Read README.md and sum it up in one line. The deploy token is [redacted:")


def test_the_credential_in_the_prompt_is_nowhere_under_ai(worlds: dict[str, object]) -> None:
    run = headless_run(worlds)
    assert run.world.places_holding(run.world.credential) == []


def test_status_says_verified_and_that_a_real_event_reached_capture(worlds: dict[str, object]) -> None:
    run = headless_run(worlds)
    rows = {row["aspect"]: row for row in run.world.status_rows() if row["provider"] == "cline"}
    assert rows["session"]["state"] == "verified" and rows["prompt"]["state"] == "verified"
    assert "last real event here" in str(rows["session"]["reason"]), rows["session"]
    assert "MCP server is not wired by install" in str(rows["session"]["reason"])


# Cline 3.0.65 mid-answer: SIGINT (Ctrl-C) ends it at once and runs SessionShutdown; SIGHUP and SIGKILL end it
# with no hook; SIGTERM, to the cline process or its whole group, did not end it within 25 s (it hangs on).
KILLS = {signal.SIGINT: ("interrupted", "session_shutdown"), signal.SIGKILL: ("interrupted", "vanished")}


@pytest.mark.parametrize("how", list(KILLS), ids=lambda how: how.name)
def test_a_headless_run_stopped_mid_answer_is_recorded_interrupted(worlds: dict[str, object],
                                                                    how: signal.Signals) -> None:
    """Ctrl-C runs SessionShutdown (no reason, so its hook name is the reason); `kill -9` runs nothing, and the
    next majordomus command finds the client process gone."""
    run = killed_run(worlds, how)
    assert run.world.api.stalled.is_set() and run.sitting.ran.returncode in (0, -how), run.sitting.ran.describe()
    assert run.world.open_files() == []
    (record,) = run.world.records()
    assert record["provider"] == "cline"
    assert (record["outcome"], record["end_reason"]) == KILLS[how], record
    assert record.get("last_turn") in (None, "none", "running"), record


@pytest.mark.parametrize("how", list(KILLS), ids=lambda how: how.name)
def test_a_run_stopped_mid_answer_keeps_its_prompt_redacted_and_joined_to_its_episode(worlds: dict[str, object],
                                                                                      how: signal.Signals) -> None:
    """The prompt was archived at the start, before the answer began: a run stopped mid-answer keeps it."""
    run = killed_run(worlds, how)
    assert any(run.world.credential in s for s in model_texts(run.sitting.ran.requests))  # it was there to leak
    (record,) = run.world.records()
    assert [(p["episode"], p["episode_link"]) for p in run.world.prompts()] == [(record["session_id"], "open")]
    assert run.world.places_holding(run.world.credential) == []


# ---- interactive, in a terminal (tmux) --------------------------------------------------------------------

TUI = Profile("cline", r"What can I do for you\?|Ask anything", "/quit", argv=["cline"])
OFFER = "any other key to close"  # the ClinePass offer Cline shows over its prompt, a moment after it is drawn
OBSERVED_TUI = observed()["cline"]


@dataclass(frozen=True)
class TuiSitting:
    """One interactive sitting of Cline, ended, and what majordomus recorded once its next command read it."""

    world: World
    ending: str
    provider_session: str  # Cline's session id (the open file's provider_session, what `--id` resumes)
    open_before_reading: bool  # its episode was still open when Cline and its children were gone
    records: list[dict[str, object]]  # the session records that appeared with this sitting
    requests: list[Request]
    doctor: list[dict[str, object]]


def type_prompt(terminal: Terminal, prompt: str) -> None:
    """Type the prompt and Enter. Cline draws its prompt and then, a moment later, the ClinePass offer over it;
    keys typed while it opens close it and are lost. So: close the offer when it shows, clear the line, type
    again, until the prompt shows what was typed."""
    shown = re.escape(prompt[-16:])
    for _ in range(6):
        if OFFER in terminal.screen():
            terminal.keys("Escape")
        terminal.type(prompt)
        if terminal.wait_for_screen_or_exit(shown, 3):
            terminal.enter()
            return
        terminal.keys("C-u")
    raise ClientFailed(f"cline never showed the typed prompt; its screen:\n{terminal.screen()}")


def sit_in_tui(world: World, ending: str, argv: list[str], prompt: str) -> TuiSitting:
    """Start Cline in tmux, ask one prompt, wait for the answer and its TaskComplete, end the sitting as `ending`
    says (interactive.end), wait until Cline and what it started are gone, then let `majordomus episodes` read."""
    before_ids = {e.session_id for e in world.episodes()}
    first = len(world.api.requests)
    mid_answer = ending == "window-closed-mid-answer"
    world.api.script = Stall() if mid_answer else Text()
    terminal = Terminal(world, argv, "cline")
    try:
        terminal.wait_for_screen(f"{TUI.ready_screen}|{OFFER}", 90)
        type_prompt(terminal, prompt)
        if mid_answer:
            wait_until(world.api.stalled.is_set, 60, "cline's model request")
        else:
            terminal.wait_for_screen(re.escape(ANSWER[:20]), 60)
        wait_until(lambda: any(o["session_id"] not in before_ids and (mid_answer or o.get("last_turn") == "completed")
                               for o in world.open_files()), 30, "Cline's detached hooks' writes")
        (opened,) = [o for o in world.open_files() if o["session_id"] not in before_ids]
        if not mid_answer:  # a person leaves at rest: Ctrl-D or Ctrl-C while Cline still ends its run cancels it
            wait_until(lambda: session_status(world, str(opened["provider_session"])) == "idle", 30,
                       "Cline's session file at rest (status idle)")
        if ending == "kill-9":
            os.kill(terminal.pid, signal.SIGKILL)
            terminal.wait_exited(60)
        else:
            end(terminal, TUI, ending)
    finally:
        terminal.cleanup()
    # nothing of the sitting outlives it, as after a reboot
    still_open = gone_after_the_late_end(world, {str(opened["session_id"])}, 0)
    world.check_majordomus("--json", "episodes")
    records = [r for r in world.records() if r["session_id"] not in before_ids or r["session_id"] == opened[
        "session_id"]]
    return TuiSitting(world, ending, str(opened["provider_session"]), still_open, records, world.api.requests[first:],
                      world.doctor())


def session_status(world: World, session: str) -> object:
    """What Cline's own session file says of the session (`running`, `idle`, `completed`, `cancelled`)."""
    path = world.home / ".cline/data/sessions" / session / f"{session}.json"
    try:
        return json.loads(path.read_text()).get("status")
    except (OSError, ValueError):
        return None


def tui_run(worlds: dict[str, object], ending: str) -> TuiSitting:
    key = f"tui-{ending}"
    if key not in worlds:
        world = World(Path(str(worlds["base"])) / key, CLINE, worlds["installed"])  # type: ignore[arg-type]
        prompt = f"Read README.md and sum it up. The deploy token is {world.credential}, keep it out of it."
        worlds[key] = sit_in_tui(world, ending, ["cline"], prompt)
    found = worlds[key]
    assert isinstance(found, TuiSitting)
    return found


@pytest.mark.parametrize("ending", list(OBSERVED_TUI))
def test_an_interactive_ending_is_recorded_as_cline_really_ends(worlds: dict[str, object], ending: str) -> None:
    """Cline 3.0.65 runs no end hook on /quit, Ctrl-D, Ctrl-C or a window closed after the answer: the episode is
    open when Cline is gone, and the next majordomus command finds its process gone and reads Cline's session file,
    which says status completed (exit_code 0, ended_at): `closed`, reason `completed`. A window closed mid-answer
    runs SessionShutdown; with no turn hook run yet, no last turn."""
    run = tui_run(worlds, ending)
    seen = OBSERVED_TUI[ending]
    assert run.open_before_reading == (seen["event"] == "none")
    (record,) = run.records
    assert record["provider"] == "cline" and record["compactions"] == 0, record
    assert {k: str(record.get(k)) for k in ("outcome", "end_reason", "last_turn")} == {
        k: seen[k] for k in ("outcome", "end_reason", "last_turn")}, record


@pytest.mark.parametrize("ending", list(OBSERVED_TUI))
def test_an_interactive_sitting_leaves_no_credential_and_no_warning(worlds: dict[str, object], ending: str) -> None:
    run = tui_run(worlds, ending)
    assert any(run.world.credential in s for s in model_texts(run.requests))  # it was there to leak
    assert run.world.places_holding(run.world.credential) == []
    assert [f for f in run.doctor if f["level"] in ("WARN", "FAIL")] == []


@pytest.mark.parametrize("ending", list(OBSERVED_TUI))
def test_the_first_message_typed_in_the_terminal_ui_is_archived_once_with_its_episode(
        worlds: dict[str, object], ending: str) -> None:
    """Each message typed at the idle prompt starts a run (TaskStart, then TaskComplete) and runs no
    UserPromptSubmit; the session's first one is in Cline's session file when TaskStart runs."""
    run = tui_run(worlds, ending)
    (record,) = run.records
    assert [(p["event"], p["episode"], p["episode_link"]) for p in run.world.prompts()] == [
        ("TaskStart", record["session_id"], "open")]
    assert str(run.world.prompts()[0]["text"]).startswith("Read README.md and sum it up. The deploy token is [")


def test_an_interactive_sitting_killed_after_its_answer_stays_interrupted(worlds: dict[str, object]) -> None:
    """kill -9 leaves Cline's session file at status idle, with no ended_at: nothing says the sitting ended in
    order, so the next command records it `interrupted`, reason `vanished`."""
    run = tui_run(worlds, "kill-9")
    (record,) = run.records
    assert (record["outcome"], record["end_reason"], record["last_turn"]) == ("interrupted", "vanished", "completed")


@dataclass(frozen=True)
class Cleared:
    world: World
    open_in_the_sitting: list[dict[str, object]]  # the open files once the second conversation was answered
    records: list[dict[str, object]]  # after /quit and a majordomus command


def cleared_run(worlds: dict[str, object]) -> Cleared:
    """A prompt answered, `/clear`, a second prompt answered, `/quit`, then `majordomus episodes` reads."""
    if "cleared" not in worlds:
        world = World(Path(str(worlds["base"])) / "cleared", CLINE, worlds["installed"])  # type: ignore[arg-type]
        world.api.script = Text()
        terminal = Terminal(world, ["cline"], "cline")
        try:
            terminal.wait_for_screen(f"{TUI.ready_screen}|{OFFER}", 90)
            def completed() -> int:
                return sum(o.get("last_turn") == "completed" for o in world.open_files())

            type_prompt(terminal, "Read README.md and sum it up.")
            wait_until(lambda: completed() == 1, 60, "the first answer's TaskComplete")
            terminal.submit("/clear")
            terminal.wait_for_screen(r"What can I do for you\?", 30)  # the empty start screen again
            type_prompt(terminal, "A new conversation: what is in this folder?")
            wait_until(lambda: completed() == 2, 60, "the second answer's TaskComplete")
            opened = world.open_files()
            end(terminal, TUI, "exit")
        finally:
            terminal.cleanup()
        world.check_majordomus("--json", "episodes")
        worlds["cleared"] = Cleared(world, opened, world.records())
    found = worlds["cleared"]
    assert isinstance(found, Cleared)
    return found


def test_clear_starts_a_second_episode_and_leaves_the_first_open_until_cline_is_gone(
        worlds: dict[str, object]) -> None:
    """`/clear` is a new Cline session (a new rootSessionId) and runs no end hook for the first: both episodes are
    open in the one cline process. Cline's file says the first session completed at /clear and the second at
    /quit, so both are closed once it has exited."""
    run = cleared_run(worlds)
    assert len({o["provider_session"] for o in run.open_in_the_sitting}) == 2, run.open_in_the_sitting
    assert len({o["client"] for o in run.open_in_the_sitting}) == 1, run.open_in_the_sitting
    assert [(r["outcome"], r["end_reason"], r["last_turn"]) for r in run.records] == [
        ("closed", "completed", "completed")] * 2, run.records


def test_after_clear_each_conversations_first_message_is_archived_with_its_own_episode(
        worlds: dict[str, object]) -> None:
    run = cleared_run(worlds)
    episode_of = {o["provider_session"]: o["session_id"] for o in run.open_in_the_sitting}
    prompts = run.world.prompts()
    assert sorted(str(p["text"]) for p in prompts) == ["A new conversation: what is in this folder?",
                                                       "Read README.md and sum it up."]
    assert [(p["episode"], p["episode_link"]) for p in prompts] == [(episode_of[p["session"]], "open") for p in prompts]
    assert len({p["episode"] for p in prompts}) == 2


@dataclass(frozen=True)
class Resumed:
    first: TuiSitting
    second: TuiSitting


def resumed_run(worlds: dict[str, object]) -> Resumed:
    if "resumed" not in worlds:
        world = World(Path(str(worlds["base"])) / "resumed", CLINE, worlds["installed"])  # type: ignore[arg-type]
        first = sit_in_tui(world, "exit", ["cline"], f"Read README.md and sum it up. Token {world.credential}.")
        second = sit_in_tui(world, "exit", ["cline", "--id", first.provider_session],
                            "Now say the same in fewer words.")
        worlds["resumed"] = Resumed(first, second)
    found = worlds["resumed"]
    assert isinstance(found, Resumed)
    return found


def test_a_resumed_sitting_continues_the_cline_session_and_its_conversation(worlds: dict[str, object]) -> None:
    run = resumed_run(worlds)
    assert run.second.provider_session == run.first.provider_session
    opening = "Read README.md and sum it up."
    assert any(opening in s for s in model_texts(run.second.requests))  # the model saw the first sitting


def test_a_resumed_sitting_is_a_new_episode_of_the_same_session_and_only_the_first_is_closed_by_clines_file(
        worlds: dict[str, object]) -> None:
    """`cline --id` is a new process (TaskResume, then TaskComplete), so, as for every client, the sitting after
    the client vanished is a new episode. The first, read before the resume, is closed by Cline's file (completed);
    the resumed one stays `interrupted`, `vanished`: Cline keeps the first process's pid in that file on a resume,
    so it cannot say that the resumed process ended the session."""
    run = resumed_run(worlds)
    records = run.first.world.records()
    assert [(r["outcome"], r["end_reason"], r["last_turn"]) for r in records] == [
        ("closed", "completed", "completed"), ("interrupted", "vanished", "completed")], records
    assert len({r["session_id"] for r in records}) == 2
    assert run.first.world.places_holding(run.first.world.credential) == []


def test_a_resumed_sitting_archives_the_first_message_once_and_with_the_first_episode(
        worlds: dict[str, object]) -> None:
    """TaskResume's message is not on disk when it runs (Cline writes messages when a run ends), and the file's
    prompt is the first sitting's: nothing more is archived, and nothing with the resumed episode."""
    run = resumed_run(worlds)
    first_episode = run.first.records[0]["session_id"]
    assert [(p["event"], p["episode"]) for p in run.first.world.prompts()] == [("TaskStart", first_episode)]


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
