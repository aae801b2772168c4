"""A hook episode whose client process is gone ends at once, by evidence, not by time (SPEC 4.4).

The start wrote the client process that ran it into the open file (`client: <pid>@<start ticks>`) and where that
pid means it (`client_namespace`: this boot, this pid namespace). A command that reads the episodes closes each
of this worktree's hook episodes whose process no longer runs as `interrupted`, reason `vanished`, with what
showed it. An episode whose client runs (or is only stopped), or whose pid was read in another namespace, is
never touched. A client that leaves without an end hook but says in a file of its own that it ended the session
(providers.yaml `state_file`: Cline) has that episode recorded `closed`, its own word the end reason, with both
pieces of evidence. Stdlib only: every hook runs this.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from majordomus.clients.providers import get_provider
from majordomus.episodes import store
from majordomus.errors import MajordomusError, MissingError
from majordomus.identity import process_gone, process_namespace, session_key, worktree_id

if TYPE_CHECKING:
    from majordomus.episodes.client_state import OrderlyEnd
    from majordomus.layout import Layout

REASON = "vanished"


def gone_client(opened: store.OpenFile, namespace: str | None) -> str | None:
    """Why this open hook episode's client is gone, as a sentence; None while it runs or when no one can tell."""
    if opened.is_connection or not opened.client or opened.provider_session is None:
        return None
    if namespace is None or opened.client_namespace != namespace:
        return None  # another container, machine or boot: its pids name nothing here
    return process_gone(opened.client)


def end_vanished(layout: Layout, *, dry_run: bool = False, spare: str | None = None) -> list[str]:
    """Close this worktree's hook episodes whose client vanished; one line for each (what would be, dry_run).

    `spare` is the provider session of the hook that asks: its client is running that hook, so a dead process in
    its open file contradicts nothing and is left to the session's own end (or the stale bound)."""
    namespace = process_namespace()
    if namespace is None:
        return []
    here = worktree_id(layout.root)
    spared = session_key(spare) if spare is not None else None
    lines: list[str] = []
    for episode in store.open_episodes(layout):
        opened = episode.file
        if episode.key == spared or opened.worktree_id not in (None, here):
            continue  # its record must carry its own worktree's state: its own commands close it
        why = gone_client(opened, namespace)
        if why is None or opened.provider_session is None:
            continue
        reason, outcome = REASON, "interrupted"
        said = _orderly_end(opened)
        if said is not None:
            reason, outcome, why = said.status, "closed", f"{why}; {said.sentence}"
        if dry_run:
            lines.append(f"would close {opened.session_id} ({outcome}, reason {reason}): {why}")
            continue
        from majordomus.episodes.boundary import close_episode  # only when one vanished: most hooks skip it

        line = close_episode(layout, opened.provider_session, reason, outcome, evidence=why, client=opened.client)
        lines.append(f"{line}: {why}" if line.startswith("episode closed") else line)
    return lines


def _orderly_end(opened: store.OpenFile) -> OrderlyEnd | None:
    """What the client's own session file says of the end, where its provider declares one (Cline)."""
    try:
        row = get_provider(opened.provider or "").state_file
    except MissingError:
        return None  # a provider this version does not declare: nothing but the vanished process is known
    if row is None or not row.status_key:
        return None
    from majordomus.episodes.client_state import orderly_end

    return orderly_end(row, opened)


def end_vanished_quietly(layout: Layout, *, spare: str | None = None) -> list[str]:
    """`end_vanished` for a hook or a reader that must go on whatever happens: a failure is logged, never raised."""
    try:
        return end_vanished(layout, spare=spare)
    except (OSError, MajordomusError, ValueError) as exc:
        from majordomus.episodes.boundary import log_failure

        detail = exc.message if isinstance(exc, MajordomusError) else f"{type(exc).__name__}: {exc}"
        log_failure(layout, f"closing the episodes of vanished clients: {detail}")
        return []
