"""Each real client in a terminal (tmux), a prompt typed and answered, then the sitting ended as a person ends
it: the client's own leave command, Ctrl-D, Ctrl-C twice, the window closed after the answer or in the middle
of it; or the conversation compacted (`/compact`) or cleared (`/clear`) before leaving, or left and then
taken up again with the client's resume command for a second prompt. What the client sent
and what majordomus recorded must be what endings_observed.yaml (and the table in docs/clients.md, which
tests/clients/test_endings_table.py holds to it) says; where a client sends no end at
all, the next majordomus command finds its process gone and records it `interrupted`, never `closed`.

The sittings run four at a time, each in its own world (HOME, repository, fake API port, tmux server).
Qwen Code sits here too: its terminal UI ends as the four others' do, though its one-shot run does not
(test_qwen.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from real_clients.drivers import DRIVERS, QWEN, Driver
from real_clients.fake_api import last_user_texts, strings
from real_clients.interactive import (
    RESUMED_MARK,
    Ended,
    observed,
    recorded,
    recorded_after,
    sit_and_end,
    sitting_episode,
)
from real_clients.pinned import Installed
from real_clients.world import World

OBSERVED = observed()
# Cline's rows are held by test_cline.py (its sittings fire no prompt hook, so they have a driver of their own)
SITTERS: dict[str, Driver] = {**DRIVERS, QWEN.provider: QWEN}
CELLS = [(client, ending) for client, endings in OBSERVED.items() for ending, seen in endings.items()
         if seen.get("offered", True) and client in SITTERS]
NOT_OFFERED = [(client, ending) for client, endings in OBSERVED.items() for ending, seen in endings.items()
               if not seen.get("offered", True) and client in SITTERS]
PARALLEL = 4


@pytest.fixture(scope="module")
def sittings(request: pytest.FixtureRequest, installed: Installed,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[tuple[str, str], Future[Ended]]]:
    """Every sitting the selected tests read, started at once, PARALLEL at a time."""
    wanted = {(item.callspec.params["client"], item.callspec.params["ending"]) for item in request.session.items
              if item.module is request.module and hasattr(item, "callspec") and "sittings" in item.fixturenames}
    base = tmp_path_factory.mktemp("interactive")
    worlds: list[World] = []

    def one(client: str, ending: str) -> Ended:
        world = World(Path(base) / f"{client}-{ending}", SITTERS[client], installed)
        worlds.append(world)
        return sit_and_end(world, ending)

    with ThreadPoolExecutor(PARALLEL) as pool:
        futures = {cell: pool.submit(one, *cell) for cell in CELLS if cell in wanted}
        yield futures
        for future in futures.values():
            future.cancel()
    for world in worlds:
        world.close()


def ids(cells: list[tuple[str, str]]) -> list[Any]:
    return [pytest.param(*cell, id=f"{cell[0]}-{cell[1]}") for cell in cells]


@pytest.mark.parametrize(("client", "ending"), ids(CELLS))
def test_an_ending_is_recorded_as_the_client_really_ends(sittings: dict[tuple[str, str], Future[Ended]],
                                                         client: str, ending: str) -> None:
    ended = sittings[client, ending].result()
    seen = OBSERVED[client][ending]
    after = [seen["after"]] if "after" in seen else []
    assert recorded(ended, 1 + len(after)) == {k: seen[k] for k in ("outcome", "end_reason", "last_turn")}, \
        ended.records
    # what came after in the same sitting (`/clear` opens the next conversation's episode, the leave closes it)
    assert recorded_after(ended) == [{k: a[k] for k in ("outcome", "end_reason", "last_turn")} for a in after]


@pytest.mark.parametrize(("client", "ending"), ids(CELLS))
def test_an_ending_without_an_end_event_is_never_closed(sittings: dict[tuple[str, str], Future[Ended]],
                                                        client: str, ending: str) -> None:
    ended = sittings[client, ending].result()
    # the client sent no end: the episode was still open when the client was gone, and reading ended it
    assert ended.open_before_reading == (OBSERVED[client][ending]["event"] == "none")
    if ended.open_before_reading:
        assert [r["outcome"] for r in ended.records] == ["interrupted"], ended.records


@pytest.mark.parametrize(("client", "ending"), ids(CELLS))
def test_an_ended_sitting_keeps_its_prompt_linked_open(sittings: dict[tuple[str, str], Future[Ended]],
                                                       client: str, ending: str) -> None:
    """Its one prompt; resumed, the second sitting's prompt too, linked open to the episode it was typed in."""
    ended = sittings[client, ending].result()
    episode = sitting_episode(ended)["session_id"]
    expected = [(episode, "open")]
    if ending == "resume":
        later = [r["session_id"] for r in ended.records if r["session_id"] != episode]
        expected.append((later[0] if later else episode, "open"))
    assert [(p["episode"], p["episode_link"]) for p in ended.prompts] == expected


@pytest.mark.parametrize(("client", "ending"), ids([cell for cell in CELLS if cell[1] == "resume"]))
def test_a_resumed_sitting_takes_up_the_first_sittings_conversation(
        sittings: dict[tuple[str, str], Future[Ended]], client: str, ending: str) -> None:
    """The resume command carried the first sitting's conversation to the model, under the same provider
    session, and the second sitting's episode is another one."""
    ended = sittings[client, ending].result()
    resumed = [r for r in ended.world.api.model_requests() if RESUMED_MARK in " ".join(last_user_texts(r.api, r.body))]
    assert resumed and all(any(ended.prompt in text for text in strings(r.body)) for r in resumed)
    assert len({p["session"] for p in ended.prompts}) == 1, ended.prompts
    assert len({p["episode"] for p in ended.prompts}) == 2, ended.prompts


@pytest.mark.parametrize(("client", "ending"), ids(CELLS))
def test_a_sitting_counts_the_compactions_it_had(sittings: dict[tuple[str, str], Future[Ended]],
                                                 client: str, ending: str) -> None:
    """None but after `/compact`: then one, with its time in the ledger, and the episode stayed open."""
    ended = sittings[client, ending].result()
    seen = OBSERVED[client][ending]
    wanted = int(seen.get("compactions", 0))
    first = sitting_episode(ended)
    assert first.get("compactions", 0) == wanted
    assert [r.get("compactions", 0) for r in ended.records if r is not first] == [0] * (len(ended.records) - 1)
    assert [line["session"] for line in ended.compacted] == [first["session_id"]] * wanted
    if wanted:
        assert ended.open_when_compacted
        assert all(first["started_at"] <= line["ts"] <= first["closed_at"] for line in ended.compacted)


@pytest.mark.parametrize(("client", "ending"), ids(CELLS))
def test_no_credential_typed_in_a_sitting_reaches_the_layer(sittings: dict[tuple[str, str], Future[Ended]],
                                                            client: str, ending: str) -> None:
    ended = sittings[client, ending].result()
    assert ended.world.places_holding(ended.world.credential) == []


@pytest.mark.parametrize(("client", "ending"), ids(CELLS))
def test_doctor_finds_nothing_to_warn_about_after_a_sitting(sittings: dict[tuple[str, str], Future[Ended]],
                                                            client: str, ending: str) -> None:
    ended = sittings[client, ending].result()
    assert [f for f in ended.doctor if f["level"] in ("WARN", "FAIL")] == []


@pytest.mark.parametrize(("client", "ending"), ids(NOT_OFFERED))
def test_an_ending_a_client_does_not_offer_says_why(client: str, ending: str) -> None:
    assert OBSERVED[client][ending].get("why"), f"{client} {ending}: not offered, and no reason given"
