"""Interactive sittings of the real clients in a terminal (terminal.py), each ended the way a person ends one.

A profile knows what one client shows and wants in its terminal: how to get past its first screens (Claude
Code asks about the project's MCP server), what its empty prompt looks like, and its own name for leaving
(`/exit`, `/quit`). A sitting types one prompt holding a credential, waits until the answer is on the screen
and the end-of-turn hook is recorded (or, mid-answer, until the fake API holds the answer and the prompt is
archived), ends the way asked, waits for the client and what it started to be gone, then lets the next
majordomus command read the episodes (`majordomus episodes`), as a person's next command would.

The endings, by name (endings_observed.yaml holds what each client really did on each):
- `exit`: the client's own command (`/exit`, `/quit`), typed at an empty prompt;
- `ctrl-d`: Ctrl-D at an empty prompt (twice where the client asks to confirm);
- `ctrl-c-twice`: Ctrl-C, Ctrl-C at an empty prompt;
- `window-closed`: after a finished answer, the tmux session killed (SIGHUP, a closed terminal);
- `window-closed-mid-answer`: the same while the fake API holds the answer;
- `compact`: after the answer, the client's `/compact` (Gemini's `/compress`), once counted where a hook says so (the
  episode still open) its own leave command;
- `clear`: after the answer, the client's `/clear` (a new conversation), then its own leave command;
- `resume`: after the answer, its own leave command; then, once that end came, its resume command
  (`Profile.resume`), a second prompt answered, and its leave command again.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from real_clients.fake_api import ANSWER, Stall, Text, last_user_texts
from real_clients.terminal import Terminal
from real_clients.world import ClientFailed, World, wait_until

OBSERVED = Path(__file__).with_name("endings_observed.yaml")
AGAIN = r"(?i)again to (exit|quit)"
ENDINGS = ("exit", "ctrl-d", "ctrl-c-twice", "window-closed", "window-closed-mid-answer", "compact", "clear",
           "resume")
RESUMED_MARK = "(resumed)"
LEDGER = ".ai/local/state/ledger.jsonl"


def observed() -> dict[str, dict[str, dict[str, str]]]:
    """What each client did on each ending, as the runs showed it: the data the docs table and the tests share."""
    doc: dict[str, dict[str, dict[str, str]]] = yaml.safe_load(OBSERVED.read_text())
    return doc


def claude_ready(terminal: Terminal) -> None:
    # a project .mcp.json (capture install wrote it): the person chooses to use the server, not the default
    terminal.wait_for_screen(r"New MCP server found in this project", 90)
    terminal.press_until("Up", r"❯ Use this MCP server")
    terminal.enter()


def qwen_ready(terminal: Terminal) -> None:
    # the project's MCP server (capture install wrote it into .qwen/settings.json): the person approves it
    terminal.wait_for_screen(r"Untrusted MCP server in \.qwen/settings\.json", 90)
    terminal.wait_for_screen(r"› 1\. Approve this server", 30)
    terminal.enter()


@dataclass(frozen=True)
class Profile:
    provider: str
    ready_screen: str  # the empty prompt, once the client takes input
    quit: str  # its own command for leaving
    first_screens: Callable[[Terminal], None] | None = None
    late_end_seconds: float = 0  # how long the client's end may come after its terminal is gone
    argv: list[str] = field(default_factory=list)
    compact: str = "/compact"  # its own compaction command
    compacted_screen: str = r"Compacted"  # what it shows once the compaction is done
    compaction_counted: bool = True  # whether a hook says a compaction happened (Gemini: none)
    clear_ends: bool = True  # whether `/clear` ends the conversation's episode (an end hook)
    clear_opens: bool = True  # whether `/clear` opens the next conversation's episode at once (a start hook)
    clear_redraws: bool = False  # whether `/clear` is done only once the screen no longer shows the conversation
    resume: list[str] = field(default_factory=list)  # its command line for taking up the last conversation
    # what it shows while it is still answering, past its end-of-turn hook: a key then cancels the answer instead
    # of what it means at an idle prompt (Qwen Code's Ctrl-D and Ctrl-C), so an ending waits for it to go
    busy_screen: str | None = None


# what Gemini CLI 0.61.0's `/compress` says once done (a one-prompt conversation: "not beneficial")
GEMINI_COMPRESSED = r"Chat history compressed from|Compression was not|[Cc]ompression failed|[Nn]othing to compress"
PROFILES: dict[str, Profile] = {
    "claude-code": Profile("claude-code", r"auto mode on", "/exit", claude_ready,
                           argv=["claude"], resume=["claude", "--continue"]),
    "codex": Profile("codex", r"Ask Codex to do anything|› ", "/quit", argv=["codex"], late_end_seconds=90,
                     compacted_screen=r"Context compacted", clear_ends=False, clear_opens=False,
                     clear_redraws=True,
                     resume=["codex", "resume", "--last"]),
    "gemini": Profile("gemini", r"Type your message", "/quit", argv=["gemini"], compact="/compress",
                      compacted_screen=GEMINI_COMPRESSED, compaction_counted=False, clear_redraws=True,
                      resume=["gemini", "--resume", "latest"]),
    "copilot": Profile("copilot", r"/ commands", "/exit", argv=["copilot"],
                       compacted_screen=r"(?i)compact\w* complete", clear_opens=False,
                       resume=["copilot", "--continue"]),
    "qwen-code": Profile("qwen-code", r"Type your message", "/quit", qwen_ready, argv=["qwen"],
                         compact="/compress", compacted_screen=GEMINI_COMPRESSED, compaction_counted=False,
                         clear_redraws=True, resume=["qwen", "--continue"], busy_screen=r"esc to cancel"),
}


@dataclass(frozen=True)
class Ended:
    """One interactive sitting, ended, and what majordomus recorded of it once its next command read the episodes."""

    world: World
    ending: str
    prompt: str
    episodes: list[dict[str, Any]]  # `majordomus --json episodes` rows of the sitting's episodes
    records: list[dict[str, Any]]  # their session records' front matter
    prompts: list[dict[str, Any]]
    open_before_reading: bool  # an episode was still open when the client and its children were gone
    doctor: list[dict[str, Any]]
    seconds: float
    compacted: list[dict[str, Any]] = field(default_factory=list)  # the sitting's `session.compacted` ledger lines
    open_when_compacted: bool = False  # the episode was still open once its compaction was counted


def start(world: World, profile: Profile, resumed: bool = False) -> Terminal:
    """The client in a terminal, at its empty prompt; a client that exits first is a failure, its screen in it.
    `resumed`: its resume command line, in a HOME where it ran before (its first screens are behind it)."""
    terminal = Terminal(world, profile.resume if resumed else profile.argv, profile.provider)
    try:
        if profile.first_screens is not None and not resumed:
            profile.first_screens(terminal)
        terminal.wait_for_screen(profile.ready_screen, 90)
    except BaseException:
        terminal.cleanup()
        raise
    return terminal


def ask(world: World, terminal: Terminal, prompt: str, mid_answer: bool, busy: str | None = None) -> None:
    """Type the prompt, Enter on its own; wait for the answer and its end-of-turn hook, or the held answer; and
    where the client shows `busy` while it still answers, until that is gone."""
    before = len(world.prompts())
    terminal.type(prompt)
    terminal.wait_for_screen(re.escape(prompt[-12:]), 30)
    # Codex takes a burst of typing and the Enter after it as one paste, now and then: Enter again, once the
    # prompt has not been taken within a few seconds (an Enter at a prompt being answered changes nothing)
    for _ in range(4):
        terminal.enter()
        try:
            wait_until(lambda: len(world.prompts()) > before, 15, "the prompt's record")
            break
        except ClientFailed:
            continue
    wait_until(lambda: len(world.prompts()) > before, 1, "the prompt's record")
    if mid_answer:
        wait_until(world.api.stalled.is_set, 60, "the model request")
        return
    # this prompt's own turn: the screen and the open file may still show the turn before it (a second prompt),
    # so its end counts only once the model was asked it, the prompt hook (which the client awaits) having made
    # the turn `running` by then
    wait_until(lambda: asked(world, prompt), 60, "the model request holding the prompt")
    terminal.wait_for_screen(re.escape(ANSWER[:20]), 60)
    wait_until(lambda: any(o.get("last_turn") == "completed" for o in world.open_files()), 60,
               "the end-of-turn hook's record")
    if busy is not None:
        wait_until(lambda: not re.search(busy, terminal.screen()), 60, "the end of the client's answer")


def asked(world: World, prompt: str) -> bool:
    """Whether the client sent the model a request whose last message from the person's side holds the prompt."""
    return any(prompt in " ".join(last_user_texts(r.api, r.body)) for r in world.api.model_requests())


def end(terminal: Terminal, profile: Profile, ending: str) -> None:
    if ending in ("window-closed", "window-closed-mid-answer"):
        terminal.close_window()
        return
    if ending in ("exit", "compact", "clear", "resume"):
        terminal.run_command(profile.quit, lambda: not terminal.running(), 60, f"{profile.provider}'s exit")
    elif ending in ("ctrl-d", "ctrl-c-twice"):
        key = "C-d" if ending == "ctrl-d" else "C-c"
        # the clients ask to confirm ("ctrl+c again to exit"): the second press once that shows; a press the
        # client dropped (it was still drawing) shows nothing, and is made again
        for _ in range(4):
            terminal.keys(key)
            shown = terminal.wait_for_screen_or_exit(AGAIN, 4)
            if shown is not None:
                if shown:
                    terminal.keys(key)
                break
    else:
        raise ValueError(f"no such ending: {ending}")
    terminal.wait_exited(60)


def compact(world: World, terminal: Terminal, profile: Profile) -> bool:
    """The client's compaction command (`/compact`, Gemini's `/compress`): wait until its hook counted it (where a
    hook says so) and the client says it is done; whether the episode stayed open."""
    terminal.submit(profile.compact)
    if profile.compaction_counted:
        wait_until(lambda: any(o.get("compactions", 0) >= 1 for o in world.open_files()), 60,
                   "the compaction's count")
    terminal.wait_for_screen(profile.compacted_screen, 60)
    return len(world.open_files()) == 1


def clear(world: World, terminal: Terminal, profile: Profile, prompt: str) -> None:
    """`/clear`: wait until the client cleared its conversation, and its own events ended that conversation's
    episode and opened the next where it sends them (Copilot opens the next on its first prompt, Codex sends
    nothing), and where it redraws, until the screen no longer shows the prompt (Gemini CLI drops keys typed
    before that)."""
    before = {o["session_id"] for o in world.open_files()}

    def cleared() -> bool:
        return ((not profile.clear_ends or bool(world.records()))
                and (not profile.clear_opens or any(o["session_id"] not in before for o in world.open_files()))
                and (not profile.clear_redraws or prompt[:30] not in terminal.screen()))

    terminal.run_command("/clear", cleared, 60,
                         "the cleared conversation's end, and the next one's start where the client opens it")


def compacted(world: World, ids: set[str]) -> list[dict[str, Any]]:
    path = world.repo / LEDGER
    lines = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    return [line for line in lines if line.get("event") == "session.compacted" and line.get("session") in ids]


def sit_and_end(world: World, ending: str) -> Ended:
    import time

    profile = PROFILES[world.driver.provider]
    started = time.monotonic()
    mid_answer = ending == "window-closed-mid-answer"
    world.api.script = Text()  # what a client asks at start (Copilot, Gemini) is answered
    before = {e.session_id for e in world.episodes()}
    prompt = f"Read README.md and sum it up. The deploy token is {world.credential}, keep it out of it."
    terminal = start(world, profile)
    if mid_answer:
        world.api.script = Stall()
    try:
        ask(world, terminal, prompt, mid_answer, profile.busy_screen)
        open_when_compacted = compact(world, terminal, profile) if ending == "compact" else False
        if ending == "clear":
            clear(world, terminal, profile, prompt)
        end(terminal, profile, ending)
    finally:
        terminal.cleanup()
    if ending == "resume":
        sit_again(world, profile, before)
    ids = {e.session_id for e in world.episodes()} - before
    still_open = gone_after_the_late_end(world, ids, profile.late_end_seconds)
    listed = json.loads(world.check_majordomus("--json", "episodes").stdout)["episodes"]
    rows = [row for row in listed if row["id"] in ids]
    records = [r for r in world.records() if r["session_id"] in ids]
    doctor = world.doctor()
    return Ended(world, ending, prompt, rows, records, world.prompts(), still_open, doctor,
                 time.monotonic() - started, compacted(world, ids), open_when_compacted)


RESUMED_PROMPT = f"Now say it once more, briefly. {RESUMED_MARK}"


def sit_again(world: World, profile: Profile, before: set[str]) -> None:
    """The second sitting of `resume`: once the first one's end came (Codex's comes late, from its daemon), the
    client's resume command, a second prompt answered, then its leave command."""
    # a client that sends no end goes on all the same: the record says what followed
    closed_within(world, {e.session_id for e in world.episodes()} - before, max(profile.late_end_seconds, 15))
    terminal = start(world, profile, resumed=True)
    try:
        ask(world, terminal, RESUMED_PROMPT, mid_answer=False, busy=profile.busy_screen)
        end(terminal, profile, "exit")
    finally:
        terminal.cleanup()


def closed_within(world: World, ids: set[str], seconds: float) -> bool:
    """Wait up to `seconds` for none of `ids` to be open any more; whether that came."""
    try:
        wait_until(lambda: not any(o["session_id"] in ids for o in world.open_files()), seconds, "the episodes' end")
    except ClientFailed:
        return False
    return True


def gone_after_the_late_end(world: World, ids: set[str], late_end_seconds: float) -> bool:
    """Wait up to `late_end_seconds` for an end hook that runs after the terminal is gone (Codex's app-server
    daemon), then SIGKILL whatever of the world still lives, as at a reboot (that daemon holding a turn the fake
    API never answers): the episode's client is gone. Whether one of `ids` was still open then."""
    if late_end_seconds:
        closed_within(world, ids, late_end_seconds)
    world.kill_what_lives()
    return any(o["session_id"] in ids for o in world.open_files())


def sitting_episode(ended: Ended) -> dict[str, Any]:
    """The record of the episode the sitting's first prompt (stored redacted) was linked to."""
    linked = {p.get("episode") for p in ended.prompts if str(p.get("text", "")).startswith(ended.prompt[:29])}
    found = [r for r in ended.records if r["session_id"] in linked]
    if len(found) != 1:
        raise ClientFailed(f"{ended.world.driver.provider} {ended.ending}: the prompt's episode is not one record "
                           f"({ended.episodes})")
    return found[0]


def as_table(record: dict[str, Any]) -> dict[str, str]:
    return {"outcome": str(record["outcome"]), "end_reason": str(record.get("end_reason")),
            "last_turn": str(record.get("last_turn") or "none")}


def recorded(ended: Ended, expected: int = 1) -> dict[str, str]:
    """The prompt's episode's outcome, end reason and last turn, as the docs table states them; `expected`: how
    many episodes the sitting made (two after `/clear`)."""
    if len(ended.records) != expected:
        raise ClientFailed(f"{ended.world.driver.provider} {ended.ending}: {len(ended.records)} records "
                           f"({ended.episodes})")
    return as_table(sitting_episode(ended))


def recorded_after(ended: Ended) -> list[dict[str, str]]:
    """The episodes the sitting made besides its prompt's (the one `/clear` opened)."""
    first = sitting_episode(ended)["session_id"]
    return [as_table(r) for r in ended.records if r["session_id"] != first]
