"""Each real client compacting on its own in an interactive sitting (tmux), because the fake model API reports a
context near the model's window, then left with its own leave command.

A sitting types one prompt holding a credential, answered with usage saying the context is nearly full
(`FullContext`), then a second prompt: before answering it (Copilot: beside it) the client sums up its
conversation, which is its automatic compaction. What majordomus must record: the compaction counted on the
open episode (`compactions` and its time in the ledger's `session.compacted` line) for a client whose hook says
one happened, the episode still open until the leave command, then closed as that client's `/exit` or `/quit`
is (endings_observed.yaml), both prompts linked to it, no credential under `.ai/`, nothing for doctor to warn of.

What each pinned client really did (the numbers are the usage the fake API reported; each client's own window):
- Claude Code 2.1.332 runs Opus 5.5, whose window is 1M: 195k input tokens changed nothing, 990k made it
  compact before the next prompt, firing PreCompact (trigger `auto`, the one majordomus counts), PostCompact and
  SessionStart (source `compact`, the same session: the episode is kept).
- Codex 0.171.0 (gpt-5) compacts past its default `model_auto_compact_token_limit`, near the 272k window: at
  265k it compacted before the next answer ("Context compacted"), firing PreCompact and PostCompact, trigger
  `auto`; majordomus counts PostCompact.
- Gemini CLI 0.61.0 compresses past half the model's 1M window (`model.compressionThreshold`, 0.5 by default):
  at 1M it compressed ("Context compressed from 95% to 0%") but fired no hook that says so: its PreCompress
  fires before every model request whether it compresses or not, and comes before its threshold check
  (SPEC 4.1), so nothing is counted. The sitting holds that fact.
- Copilot CLI 1.0.102, with a bring-your-own model whose window is COPILOT_PROVIDER_MAX_PROMPT_TOKENS (200k
  here), compacts in the background once 190k were reported ("Compaction completed"), firing PreCompact
  (trigger `auto`).

The sittings run at once, each in its own world (HOME, repository, fake API port, tmux server).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from real_clients.drivers import CLIENTS, DRIVERS
from real_clients.fake_api import SUMMARY_ASKED, FullContext, Text, last_user_texts
from real_clients.interactive import (
    PROFILES,
    Ended,
    ask,
    compacted,
    end,
    gone_after_the_late_end,
    observed,
    recorded,
    sitting_episode,
    start,
)
from real_clients.pinned import Installed
from real_clients.world import World, wait_until

LEAVE = observed()  # how each client's own leave command ends an episode (`exit`)
PARALLEL = 4


@dataclass(frozen=True)
class Compacting:
    """How one client compacts on its own, as its pinned version did."""

    tokens: int  # the input tokens the fake API reports: near this client's window
    screen: str | None  # what the client shows once it compacted (Claude Code shows nothing of it)
    counted: int  # the compactions majordomus counts: its hook says one happened
    why: str = ""  # where none is counted: why
    env: dict[str, str] = field(default_factory=dict)


COMPACTING: dict[str, Compacting] = {
    "claude-code": Compacting(990_000, None, 1),
    "codex": Compacting(265_000, r"Context compacted", 1),
    "gemini": Compacting(1_000_000, r"Context compressed from \d+% to \d+%", 0, why=(
        "Gemini CLI 0.61.0 compresses its history with no hook that says it did: PreCompress fires before every "
        "model request, before the threshold check, whether it compresses or not, so it is no compaction "
        "(SPEC 4.1) and Gemini declares none")),
    "copilot": Compacting(190_000, r"Compaction completed", 1, env={"COPILOT_PROVIDER_MAX_PROMPT_TOKENS": "200000"}),
}
SECOND = "Now say it once more, briefly."


@dataclass(frozen=True)
class Compacted:
    """One sitting that compacted on its own and was left, and what majordomus recorded of it."""

    ended: Ended
    summaries: int  # the client's requests to sum up its conversation (the fake API saw them)
    reported_full: int  # answers whose usage said the context was nearly full
    open_when_compacted: list[dict[str, Any]]  # the open files once the compaction was seen, before leaving


def sit_compact_and_leave(world: World, compacting: Compacting) -> Compacted:
    profile = PROFILES[world.driver.provider]
    started = time.monotonic()
    world.extra_env.update(compacting.env)
    world.api.script = Text()  # what a client asks at start (Copilot, Gemini) is answered plainly
    prompt = f"Read README.md and sum it up. The deploy token is {world.credential}, keep it out of it."
    terminal = start(world, profile)
    try:
        world.api.script = FullContext(compacting.tokens)
        ask(world, terminal, prompt, mid_answer=False)
        ask(world, terminal, SECOND, mid_answer=False)  # the clients compacted before answering it (Copilot: beside)
        wait_until(lambda: bool(world.api.summaries), 60, "the client's summary request (its compaction)")
        if compacting.screen is not None:
            terminal.wait_for_screen(compacting.screen, 60)
        if compacting.counted:
            wait_until(lambda: any(o.get("compactions", 0) >= compacting.counted for o in world.open_files()), 60,
                       "the compaction's count")
        open_when_compacted = world.open_files()
        end(terminal, profile, "exit")
    finally:
        terminal.cleanup()
    opened = {o["session_id"] for o in open_when_compacted}
    still_open = gone_after_the_late_end(world, opened, profile.late_end_seconds)  # Codex: its app-server
    listed = json.loads(world.check_majordomus("--json", "episodes").stdout)["episodes"]
    ids = {row["id"] for row in listed}  # the world's one sitting: every episode it has
    records = [r for r in world.records() if r["session_id"] in ids]
    ended = Ended(world, "exit", prompt, listed, records, world.prompts(), still_open, world.doctor(),
                  time.monotonic() - started, compacted(world, ids), len(open_when_compacted) == 1)
    return Compacted(ended, len(world.api.summaries), world.api.reported_full, open_when_compacted)


@pytest.fixture(scope="module")
def sittings(installed: Installed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Future[Compacted]]]:
    base = tmp_path_factory.mktemp("auto-compaction")
    worlds: list[World] = []

    def one(client: str) -> Compacted:
        world = World(Path(base) / client, DRIVERS[client], installed)
        worlds.append(world)
        return sit_compact_and_leave(world, COMPACTING[client])

    with ThreadPoolExecutor(PARALLEL) as pool:
        futures = {client: pool.submit(one, client) for client in CLIENTS}
        yield futures
        for future in futures.values():
            future.cancel()
    for world in worlds:
        world.close()


@pytest.mark.parametrize("client", CLIENTS)
def test_a_nearly_full_context_makes_the_client_compact_on_its_own(sittings: dict[str, Future[Compacted]],
                                                                   client: str) -> None:
    """The usage said the context was nearly full; the client asked for its summary after the first prompt's
    answer, in the second prompt's turn."""
    sat = sittings[client].result()
    assert sat.reported_full >= 1 and sat.summaries >= 1
    asks = [" ".join(last_user_texts(r.api, r.body)) for r in sat.ended.world.api.model_requests()]
    first = next(i for i, text in enumerate(asks) if "Read README.md" in text)
    second = next(i for i, text in enumerate(asks) if SECOND in text)
    summary = next(i for i, text in enumerate(asks) if SUMMARY_ASKED.search(text))
    assert first < summary
    assert summary < second or client == "copilot"  # Copilot compacts in the background, beside the answer


@pytest.mark.parametrize("client", CLIENTS)
def test_an_automatic_compaction_is_counted_with_its_time_while_the_episode_stays_open(
        sittings: dict[str, Future[Compacted]], client: str) -> None:
    sat = sittings[client].result()
    wanted = COMPACTING[client].counted
    first = sitting_episode(sat.ended)
    # the compaction came while the one episode of the sitting was open, and it stayed open until the leave
    assert [o["session_id"] for o in sat.open_when_compacted] == [first["session_id"]]
    assert [o.get("compactions", 0) for o in sat.open_when_compacted] == [wanted]
    assert first.get("compactions", 0) == wanted
    assert [line["session"] for line in sat.ended.compacted] == [first["session_id"]] * wanted
    assert all(first["started_at"] <= line["ts"] <= first["closed_at"] for line in sat.ended.compacted)


@pytest.mark.parametrize("client", [c for c in CLIENTS if not COMPACTING[c].counted])
def test_a_client_whose_compaction_fires_no_hook_says_why(client: str) -> None:
    assert COMPACTING[client].why, f"{client} compacts and nothing is counted, and no reason is given"


@pytest.mark.parametrize("client", CLIENTS)
def test_a_compacted_sitting_is_closed_as_the_clients_leave_command_closes_it(
        sittings: dict[str, Future[Compacted]], client: str) -> None:
    sat = sittings[client].result()
    seen = LEAVE[client]["exit"]
    assert recorded(sat.ended) == {k: seen[k] for k in ("outcome", "end_reason", "last_turn")}, sat.ended.records
    assert not sat.ended.open_before_reading  # the client's own end closed it, not the next command


@pytest.mark.parametrize("client", CLIENTS)
def test_both_prompts_of_a_compacted_sitting_are_linked_to_its_episode(sittings: dict[str, Future[Compacted]],
                                                                       client: str) -> None:
    sat = sittings[client].result()
    episode = sitting_episode(sat.ended)["session_id"]
    assert [(p["episode"], p["episode_link"]) for p in sat.ended.prompts] == [(episode, "open")] * 2


@pytest.mark.parametrize("client", CLIENTS)
def test_no_credential_typed_in_a_compacted_sitting_reaches_the_layer(sittings: dict[str, Future[Compacted]],
                                                                      client: str) -> None:
    world = sittings[client].result().ended.world
    assert world.places_holding(world.credential) == []


@pytest.mark.parametrize("client", CLIENTS)
def test_doctor_finds_nothing_to_warn_about_after_a_compacted_sitting(sittings: dict[str, Future[Compacted]],
                                                                      client: str) -> None:
    ended = sittings[client].result().ended
    assert [f for f in ended.doctor if f["level"] in ("WARN", "FAIL")] == []
