"""A real client stopped with SIGSTOP is not a vanished one: Gemini CLI in a terminal, wired by `capture install`
(its hooks and the project's MCP server), attaches its sitting through MCP, and is then stopped as Ctrl-Z stops a
job: the whole process group, the client and the `majordomus-mcp` it spawned. While it is stopped, every reader
of the episodes runs (`episodes`, `capture status`, `doctor`, `capture recover`); continued, the person asks
again and leaves with `/quit`. One episode, both prompts linked to it, closed as the client ended it.

Stopped past the stale bound (the open episode's last activity moved back a day while the client is stopped):
what the record then says is in docs/episodes.md, "A stopped client", and held here.
"""

from __future__ import annotations

import os
import re
import secrets
import signal
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from real_clients.drivers import DRIVERS
from real_clients.fake_api import Text, ToolCall
from real_clients.interactive import PROFILES, ask, start
from real_clients.pinned import Installed
from real_clients.terminal import Terminal
from real_clients.world import ClientFailed, World, wait_until

# the project's MCP tool runs without a confirmation dialog, as for a person who chose to allow it
GEMINI = replace(PROFILES["gemini"], argv=["gemini", "--approval-mode", "yolo"])
READERS = (["episodes"], ["capture", "status"], ["doctor"], ["capture", "recover"])


@dataclass(frozen=True)
class Stopped:
    world: World
    external_id: str
    opened: list[dict[str, Any]]  # the open files once the attach was answered
    while_stopped: list[dict[str, Any]]  # the open files after every reader ran, the client stopped
    records_while_stopped: list[dict[str, Any]]
    records: list[dict[str, Any]]  # at the end of the sitting
    prompts: list[dict[str, Any]]
    answer: str  # what the MCP attach answered, as the model got it


def descendants(pid: int) -> list[int]:
    """The process and everything under it (Linux /proc children lists)."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        try:
            todo += [int(c) for c in Path(f"/proc/{current}/task/{current}/children").read_text().split()]
        except OSError:
            continue
    return found


def state(pid: int) -> str:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "gone"
    return stat[stat.rindex(")") + 2]


def stop_client(client: int) -> list[int]:
    """`kill -STOP` (a debugger, a person in another terminal) to the client process its hooks name, and to what
    it runs (the project's `majordomus-mcp`), as Ctrl-Z stops a job. Gemini's pane process is only its relauncher,
    which waits for it; tmux, which continues a pane process that stops, sees no stop. Gemini's own Ctrl-Z
    (pressed twice) did not always suspend it right after a turn under tmux: the second press came back as the
    last prompt in the input box, so the test does not rely on it."""
    stopped = descendants(client)
    for pid in stopped:
        os.kill(pid, signal.SIGSTOP)
    wait_until(lambda: all(state(p) in ("T", "gone") for p in stopped), 15, "the client to stop")
    return stopped


def ask_again(world: World, terminal: Terminal, prompt: str, words: str, *, episode_open: bool) -> None:
    """The next prompt once the client goes on; an Enter it did not take (it was still redrawing) is pressed again."""
    before = len(world.prompts())
    world.api.script = Text(words)
    terminal.type(prompt)
    terminal.wait_for_screen(re.escape(prompt[-12:]), 30)
    for _ in range(4):
        terminal.enter()
        try:
            wait_until(lambda: len(world.prompts()) > before, 8, "the next prompt's record")
            break
        except ClientFailed:
            continue
    wait_until(lambda: len(world.prompts()) > before, 1, "the next prompt's record")
    terminal.wait_for_screen(re.escape(words), 60)
    if episode_open:
        wait_until(lambda: [o.get("last_turn") for o in world.open_files()] == ["completed"], 30,
                   "the next turn's end")
    else:  # no episode to show the turn's end: its hooks' line on the screen is gone
        wait_until(lambda: "Executing Hook" not in terminal.screen(), 30, "the next turn's hooks")


def leave(terminal: Terminal) -> None:
    """`/quit`; an Enter the client did not take (still redrawing after its hooks) is pressed again."""
    terminal.submit(GEMINI.quit)
    for _ in range(4):
        if terminal.wait_for_screen_or_exit(r"(?!)", 8) is False:
            break
        terminal.enter()
    terminal.wait_exited(60)


def sit_stopped(world: World, *, past_stale_bound: bool) -> Stopped:
    world.api.script = Text()
    terminal = start(world, GEMINI)
    external_id = f"gemini-stopped-{secrets.token_hex(4)}"
    calls = world.driver.attach_calls(external_id)
    try:
        world.api.script = ToolCall(calls)
        ask(world, terminal, "Record this sitting in the repository, as the majordomus server asks.", False)
        if world.api.tool_calls_sent != [c.wanted for c in calls]:
            raise ClientFailed(f"gemini did not call the attach: sent {world.api.tool_calls_sent}")
        opened = world.open_files()
        [client] = {int(str(o["client"]).split("@")[0]) for o in opened}
        wait_until(lambda: "Executing Hook" not in terminal.screen(), 30, "the end-of-turn hooks")
        stopped = stop_client(client)
        try:
            if past_stale_bound:
                world.age_open_episodes(25)
            for argv in READERS:
                if world.majordomus(*argv).returncode not in (0, 10):
                    raise ClientFailed(f"majordomus {' '.join(argv)} failed with the client stopped")
            while_stopped, records_while_stopped = world.open_files(), world.records()
        finally:
            for pid in stopped:
                os.kill(pid, signal.SIGCONT)
        ask_again(world, terminal, "And now sum up README.md in one line.", "README: a small test repository.",
                  episode_open=not past_stale_bound)
        leave(terminal)
    finally:
        terminal.cleanup()
    world.check_majordomus("episodes")
    answers = [r for r in world.api.model_requests() if external_id in r.raw.decode(errors="replace")]
    answer = answers[-1].raw.decode(errors="replace") if answers else ""
    return Stopped(world, external_id, opened, while_stopped, records_while_stopped, world.records(),
                   world.prompts(), answer)


@pytest.fixture(scope="module")
def stopped(installed: Installed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[bool, Future[Stopped]]]:
    base = tmp_path_factory.mktemp("stopped")
    worlds = {past: World(base / f"gemini-{'past' if past else 'within'}", DRIVERS["gemini"], installed)
              for past in (False, True)}
    with ThreadPoolExecutor(2) as pool:
        futures = {past: pool.submit(sit_stopped, world, past_stale_bound=past) for past, world in worlds.items()}
        yield futures
    for world in worlds.values():
        world.close()


def test_a_stopped_client_keeps_its_one_episode_open_and_its_hooks_go_on(stopped: dict[bool, Future[Stopped]]
                                                                        ) -> None:
    run = stopped[False].result()
    [opened] = run.opened
    assert opened["provider"] == "gemini" and opened.get("client")
    assert opened["session_id"] in run.answer  # the MCP attach named the hook episode: one sitting, one episode
    assert [o["session_id"] for o in run.while_stopped] == [opened["session_id"]]
    assert run.records_while_stopped == []
    assert [(r["session_id"], r["outcome"], r["end_reason"]) for r in run.records] == [
        (opened["session_id"], "closed", "exit")]
    assert [(p["episode"], p["episode_link"]) for p in run.prompts] == [(opened["session_id"], "open")] * 2
    assert [f for f in run.world.doctor() if f["level"] in ("WARN", "FAIL")] == []


def test_a_client_stopped_past_the_stale_bound_is_ended_stale_and_its_next_prompt_is_an_orphan(
        stopped: dict[bool, Future[Stopped]]) -> None:
    """The client lives (stopped), yet a day without activity is the stale bound: `capture recover` ends the
    episode `interrupted`, reason `stale`. Continued, Gemini sends no new start: its next prompt is archived
    `orphan` (no episode), and its `/quit` ends nothing."""
    run = stopped[True].result()
    [opened] = run.opened
    assert run.while_stopped == []
    stale = [(opened["session_id"], "interrupted", "stale", "completed")]
    assert [(r["session_id"], r["outcome"], r["end_reason"], r["last_turn"]) for r in run.records_while_stopped
            ] == stale
    assert [(r["session_id"], r["outcome"], r["end_reason"], r["last_turn"]) for r in run.records] == stale
    assert [(p["episode"], p["episode_link"]) for p in run.prompts] == [(opened["session_id"], "open"),
                                                                         (None, "orphan")]
