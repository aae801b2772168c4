"""The hook's entry into the episode boundary: admit the provider, read the payload, draw one boundary.

`run_session` takes the payload bytes a hook would put on stdin and returns the one report line; the CLI
prints it, the MCP board stores it verbatim. Stdlib only: this runs inside a person's hooks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from majordomus.clients.payload import Malformed, first_scalar, parse_payload
from majordomus.clients.providers import Provider, SessionRow, get_provider
from majordomus.episodes import store
from majordomus.episodes.boundary import (
    Boundary,
    Drawn,
    close_episode,
    count_compaction,
    end_turn,
    log_failure,
    start_episode,
)
from majordomus.episodes.vanished import end_vanished_quietly
from majordomus.errors import MajordomusError, MissingError, UsageError
from majordomus.identity import client_process, process_namespace, session_key
from majordomus.layout import Layout
from majordomus.redact import scrub

REASON_LIMIT = 64  # an end reason: the declared ones are short words; anything longer is cut

if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

EVENTS = ("start", "end", "compact", "turn")


@dataclass(frozen=True)
class SessionReport:
    exit_code: int
    line: str
    drawn: Drawn | None = None  # what the boundary did, when one was drawn



def admit(provider_name: str, event: str) -> tuple[Provider, SessionRow]:
    """Exit 12 unless the provider is declared with an episode source this command can serve."""
    if event not in EVENTS:
        raise UsageError(f"capture session: --event must be one of {', '.join(EVENTS)}, not '{event}'")
    provider = get_provider(provider_name)
    row = provider.session_row()
    if row is None:
        offer = provider.offers.get("episode", "none")
        raise MissingError(f"capture session: provider '{provider_name}' declares episode: {offer} and no adapter row",
                           "run majordomus capture status to see which providers draw episodes")
    return provider, row



def run_session(root: Path, provider: str, event: str, payload: bytes, *, dry_run: bool = False) -> SessionReport:
    """Draw one boundary. Raises only for admission (exit 12/2); once admitted, always exit 0."""
    prov, row = admit(provider, event)
    layout = Layout(root)
    layout.require()
    try:
        data = parse_payload(payload, empty=True)
    except Malformed as problem:
        log_failure(layout, f"capture session --provider {provider} --event {event}: {problem}; nothing recorded")
        return SessionReport(0, f"capture session: {problem}; nothing recorded "
                                f"(see {_rel(layout, layout.context_log)})")
    return _draw(layout, prov, row, event, data, dry_run=dry_run)


def run_payload(root: Path, provider: str, event: str, data: dict[str, Any], *, held_by: int | None = None
                ) -> SessionReport:
    """`run_session` for a caller that holds the payload object already (the board): the same reader of its
    fields, without a JSON round trip. `held_by` names the server that holds the episode it opens."""
    prov, row = admit(provider, event)
    layout = Layout(root)
    layout.require()
    return _draw(layout, prov, row, event, data, held_by=held_by)


def _draw(layout: Layout, prov: Provider, row: SessionRow, event: str, data: dict[str, Any], *,
          dry_run: bool = False, held_by: int | None = None) -> SessionReport:
    provider = prov.name
    where = f"capture session --provider {provider} --event {event}"
    # every string first_scalar returns is redacted; a reason is also cut short: past the declared reasons it
    # is a client's free text, and it lands in the tracked record, the ledger and the report
    reason = first_scalar(data, row.reason_keys)
    boundary = Boundary(prov, event, first_scalar(data, row.session_keys), first_scalar(data, row.source_keys),
                        reason[:REASON_LIMIT] if reason else reason)
    if boundary.provider_session is None:
        keys = ", ".join(scrub(str(k), 40) or "" for k in sorted(data)[:30]) or "none"
        log_failure(layout, f"{where}: the payload names no provider session (keys: {keys}); nothing recorded")
        return SessionReport(0, f"capture session: the payload names no provider session (looked for "
                                f"{', '.join(row.session_keys)}); nothing recorded")
    if dry_run:
        reason = f", reason {boundary.reason}" if boundary.reason else ""
        return SessionReport(0, f"capture session: would {event} the episode for {provider} "
                                f"(provider session {boundary.provider_session}){reason}")
    if held_by is None:  # a hook reads the episodes: a vanished client's ends first (the board's reaper does its own)
        end_vanished_quietly(layout, spare=None if event == "start" else boundary.provider_session)
    try:
        if event == "start":
            from majordomus.episodes import starting  # only a start leaves the mark a racing prompt waits for

            # a server's attach has no prompt hook racing it: no connection runs one (saves 8 syscalls an attach)
            started = starting.mark(layout, boundary.provider_session) if held_by is None else None
            try:
                # a hook names the client process that ran it: an attach from that sitting finds this episode
                client = client_process() if held_by is None else None
                drawn = start_episode(layout, boundary, held_by=held_by, client=client,
                                      client_namespace=process_namespace() if client else None)
            finally:
                starting.clear(started)
            if drawn.opened and prov.offers.get("episode") == "hooks":
                # a hook start recovers this worktree's stale episodes (SPEC 4.4); a connection start does not:
                # the server recovers at start-up and reaps on its schedule, so 100 attaches cost 100 writes
                _recover_others(layout, session_key(boundary.provider_session))
            return SessionReport(0, drawn.line, drawn)
        elif event == "end":
            outcome = "closed" if boundary.reason in row.deliberate else "interrupted"
            # a reason that is not deliberate after a completed turn cut nothing short (SPEC 4.1 `turn`)
            line = close_episode(layout, boundary.provider_session, boundary.reason, outcome, turn_rule=True,
                                 turn_wired=(lambda: event_wired(layout, prov, "turn"))
                                 if "turn" in row.events else None)
        elif event == "turn":
            status = first_scalar(data, row.turn_status_keys) if row.turn_status_keys else None
            line = end_turn(layout, boundary, completed=status is None or status in row.turn_completed,
                            status=status)
        elif "compact" not in row.events and prov.offers.get("episode") == "hooks":
            line = (f"capture session: {provider} declares no compaction event (offers compaction: "
                    f"{prov.offers.get('compaction', 'none')}); not counted")
        else:
            line = count_compaction(layout, boundary)
    except (OSError, MajordomusError, ValueError) as exc:
        detail = exc.message if isinstance(exc, MajordomusError) else f"{type(exc).__name__}: {exc}"
        log_failure(layout, f"{where}: {detail}")
        verb = {"start": "open", "end": "close", "compact": "count the compaction of",
                "turn": "record the turn of"}[event]
        return SessionReport(0, f"capture session: could not {verb} the episode; "
                                f"see {_rel(layout, layout.context_log)}")
    return SessionReport(0, line)



def event_wired(layout: Layout, prov: Provider, event: str) -> bool:
    """The client's hook file (its per-person one, else its shared one) calls our hook for `event`: a turn left
    running at a deliberate end is then evidence, not an install that predates the turn event; an attach from a
    client whose start is wired here comes from a hook sitting."""
    wanted = f"capture session --provider {prov.name} --event {event}".encode()
    for rel in prov.hook_files():
        try:
            with open(layout.root / rel, "rb") as f:
                if wanted in f.read(1024 * 1024):
                    return True
        except OSError:
            continue
    return False


def _recover_others(layout: Layout, key: str) -> None:
    """A new provider session's start closes this worktree's stale hook episodes (SPEC 4.4)."""
    try:
        if not any(e.key != key for e in store.open_episodes(layout)):
            return
        from majordomus.episodes.recover import recover  # only when others are open: most starts skip its imports

        recover(layout.root)
    except (OSError, MajordomusError) as exc:
        log_failure(layout, f"recovery at start: {exc}")


def _rel(layout: Layout, path: Path) -> str:
    return str(path.relative_to(layout.root))
