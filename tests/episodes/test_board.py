"""The connection board (SPEC §4.3) with a fake driver that implements the real interface and counts calls."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from majordomus.capabilities import episodes as caps
from majordomus.capabilities.peer_board import PeerBoard
from majordomus.capabilities.projections import tool_result
from majordomus.capabilities.registry import Caller, Refusal, Services
from majordomus.episodes.board import Board, Opened


@dataclass
class FakeDriver:
    calls: list[tuple[str, ...]] = field(default_factory=list)
    fresh: bool = True  # False: capture keeps an episode a previous server left open

    def open(self, external_id: str, **_: object) -> Opened:
        self.calls.append(("open", external_id))
        if self.fresh:
            return Opened(f"session s-1 opened for {external_id}", held=True, started_at="2026-12-02T09:00:00Z")
        return Opened("session s-1 already open here since 2026-12-02T08:00:00Z; kept", kept=True,
                      started_at="2026-12-02T08:00:00Z", attachments=3)

    def close(self, external_id: str, reason: str) -> str:
        self.calls.append(("close", external_id, reason))
        return f"episode closed ({'closed' if reason == 'detach' else 'interrupted'}, reason {reason})"

    def mark(self, external_id: str, *, held: bool, attachments: int | None = None, **_: object) -> None:
        self.calls.append(("mark", external_id, "held" if held else "detached"))

    def ended(self, external_id: str) -> None:
        self.calls.append(("ended", external_id))


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def driver() -> FakeDriver:
    return FakeDriver()


@pytest.fixture
def board(driver: FakeDriver, clock: Clock) -> Board:
    return Board(driver, grace_seconds=900, clock=clock)


def test_a_new_external_id_opens_through_capture_once(board: Board, driver: FakeDriver) -> None:
    episode, resumed = board.attach("p1", "thread")
    assert resumed is False and episode["attachments"] == 1 and episode["peer"] == "p1"
    assert episode["repository"] == "session s-1 opened for thread"
    assert driver.calls == [("open", "thread")]  # the open wrote its holder in its one write


def test_an_episode_capture_kept_is_marked_held_by_this_server(board: Board, driver: FakeDriver) -> None:
    driver.fresh = False
    episode, resumed = board.attach("p1", "thread")
    assert driver.calls == [("open", "thread"), ("mark", "thread", "held")]
    # a kept episode is reported as what it is (SPEC 4.3): its own start, resumed, every attachment counted
    assert resumed is True and episode["opened_at"] == "2026-12-02T08:00:00Z" and episode["attachments"] == 4


def test_a_detached_episode_is_resumed_without_calling_capture(board: Board, driver: FakeDriver) -> None:
    board.attach("p1", "thread")
    assert board.detach("p1") == ["thread"]
    assert board.get("thread")["state"] == "detached" and "peer" not in board.get("thread")  # type: ignore[index]
    episode, resumed = board.attach("p2", "thread")
    assert resumed is True and episode["attachments"] == 2 and episode["peer"] == "p2"
    assert [c for c in driver.calls if c[0] == "open"] == [("open", "thread")]


def test_a_connection_holds_at_most_one_episode(board: Board) -> None:
    board.attach("p1", "first")
    board.attach("p1", "second")
    assert board.get("first")["state"] == "detached"  # type: ignore[index]
    assert board.of_peer("p1")["external_id"] == "second"  # type: ignore[index]


def test_the_same_connection_naming_its_episode_again_is_a_heartbeat(board: Board) -> None:
    board.attach("p1", "thread")
    episode, resumed = board.attach("p1", "thread")
    assert resumed is True and episode["attachments"] == 1


def test_touch_refreshes_activity_in_memory_only(board: Board, driver: FakeDriver, clock: Clock) -> None:
    board.attach("p1", "thread")
    clock.now += 50
    assert board.get("thread")["last_activity_seconds_ago"] == 50  # type: ignore[index]
    calls = len(driver.calls)
    board.touch("p1")
    assert board.get("thread")["last_activity_seconds_ago"] == 0  # type: ignore[index]
    assert len(driver.calls) == calls


def test_reap_closes_as_expired_only_past_the_grace(board: Board, driver: FakeDriver, clock: Clock) -> None:
    board.attach("p1", "kept")
    board.attach("p2", "gone")
    board.detach("p2")
    clock.now += 900
    assert board.reap() == []
    clock.now += 1
    reaped = board.reap()
    assert [e["external_id"] for e in reaped] == ["gone"]
    assert ("close", "gone", "expired") in driver.calls
    assert board.get("gone") is None and board.get("kept")["state"] == "open"  # type: ignore[index]


def test_close_all_detaches_and_closes_nothing(board: Board, driver: FakeDriver) -> None:
    board.attach("p1", "a")
    board.attach("p2", "b")
    assert sorted(board.close_all()) == ["a", "b"]
    assert not [c for c in driver.calls if c[0] == "close"]
    assert {e["state"] for e in board.all()} == {"detached"}
    assert ("mark", "a", "detached") in driver.calls


def test_close_returns_the_end_report_and_forgets_the_episode(board: Board) -> None:
    board.attach("p1", "thread")
    closed = board.close("thread", "detach")
    assert closed is not None and closed["state"] == "detached" and "peer" not in closed
    assert closed["repository"] == "episode closed (closed, reason detach)"
    assert board.close("thread", "detach") is None and board.of_peer("p1") is None


def test_list_is_ordered_by_external_id(board: Board) -> None:
    for peer, key in (("p1", "zeta"), ("p2", "alpha"), ("p3", "mu")):
        board.attach(peer, key)
    assert [e["external_id"] for e in board.all()] == ["alpha", "mu", "zeta"]


# -- the capabilities over the board ---------------------------------------------------------------

@pytest.fixture
def services(board: Board) -> Services:
    return Services(board=board, peers=PeerBoard())


def connection(services: Services) -> Caller:
    peer = services.peers.new("stdio", None, "2025-06-18")
    return Caller(via="mcp", peer=peer.id)


def test_attach_over_plain_http_is_refused_with_the_sentence(services: Services) -> None:
    refusal = caps.attach(services, Caller(via="http"), {"external_id": "x"})
    assert refusal == Refusal("refused", caps.ATTACH_OVER_HTTP)


@pytest.mark.parametrize(("raw", "message"), [
    ("   ", "argument 'external_id' is required and must not be blank: it is what a reconnecting client is "
           "recognised by"),
    ("a\nb", "argument 'external_id' must be one line"),
    ("a\rb", "argument 'external_id' must be one line"),
])
def test_attach_refuses_blank_and_multiline_ids(services: Services, raw: str, message: str) -> None:
    assert caps.attach(services, connection(services), {"external_id": raw}) == Refusal("invalid_input", message)


def test_detach_errors_say_what_to_do(services: Services) -> None:
    caller = connection(services)
    held = caps.detach(services, caller, {})
    assert held == Refusal("refused", f"peer {caller.peer} holds no episode; call majordomus_session_attach first, "
                                      "or name the episode to close")
    assert caps.detach(services, Caller(via="http"), {}) == Refusal("refused", caps.DETACH_OVER_HTTP)
    assert caps.detach(services, Caller(via="mcp", stateless=True), {}) == Refusal("refused", caps.DETACH_STATELESS)
    assert caps.detach(services, caller, {"external_id": "nope"}) == Refusal("not_found",
                                                                              "no episode 'nope' on this server")


def test_list_omits_mine_when_the_caller_holds_nothing(services: Services) -> None:
    caller = connection(services)
    assert "mine" not in caps.list_episodes(services, caller, {})  # type: ignore[operator]
    caps.attach(services, caller, {"external_id": "t"})
    listing = caps.list_episodes(services, caller, {})
    assert isinstance(listing, dict) and listing["mine"]["external_id"] == "t" and listing["open"] == 1


def test_a_stateless_attach_is_held_by_its_handle_until_the_ttl(services: Services) -> None:
    caller = Caller(via="mcp", stateless=True)
    attached = caps.attach(services, caller, {"external_id": "s"})
    assert isinstance(attached, dict) and attached["episode"]["state"] == "open"
    handle = services.peers.find_handle("s")
    assert handle is not None and handle.transport == "http"
    named = caps.list_episodes(services, caller, {"external_id": "s"})
    assert isinstance(named, dict) and named["mine"]["external_id"] == "s"
    closed = caps.detach(services, caller, {"external_id": "s"})
    assert isinstance(closed, dict) and services.peers.find_handle("s") is None


# -- the listing and its kept JSON (a heartbeat of 100 peers lists 100 episodes) -------------------

IDS = st.text(alphabet=st.sampled_from('ab"\\é\u2028\U0001f600 -'), min_size=1, max_size=6)
STEPS = st.lists(st.one_of(
    st.tuples(st.just("attach"), st.sampled_from(["p1", "p2", "p3"]), IDS),
    st.tuples(st.just("detach"), st.sampled_from(["p1", "p2", "p3"]), st.just("")),
    st.tuples(st.just("touch"), st.sampled_from(["p1", "p2", "p3"]), st.just("")),
    st.tuples(st.just("wait"), st.just(""), st.sampled_from(["0.3", "0.7", "1", "2.5"])),
), max_size=30)


@settings(max_examples=200, deadline=None)
@given(steps=STEPS)
def test_the_listing_and_its_json_are_what_fresh_views_say_after_any_history(steps: list[tuple[str, str, str]]
                                                                             ) -> None:
    """Each step is an attach, a detach, a heartbeat of a peer, or the clock moving on (by fractions of a second:
    ages pass whole seconds at different moments). After every step the listing is the fresh view of every
    episode, in order, and its `json` is exactly what json.dumps says of it; so is a listing's tool result."""
    clock = Clock()
    board = Board(FakeDriver(), grace_seconds=900, clock=clock)
    services = Services(board=board, peers=PeerBoard())
    for op, peer, arg in steps:
        if op == "attach":
            board.attach(peer, arg)
        elif op == "detach":
            board.detach(peer)
        elif op == "touch":
            board.touch(peer)
        else:
            clock.now += float(arg)
        listing = board.all()
        assert list(listing) == [board.get(e["external_id"]) for e in listing]
        assert sorted(e["external_id"] for e in listing) == [e["external_id"] for e in listing]
        assert listing.json == json.dumps(list(listing), ensure_ascii=False, separators=(",", ":"))
        outcome = caps.list_episodes(services, Caller(via="http"), {})
        assert not isinstance(outcome, Refusal)
        text = tool_result(outcome)["content"][0]["text"]
        assert text == json.dumps(outcome, ensure_ascii=False, separators=(",", ":"))
