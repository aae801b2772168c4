"""Closes episodes whose end never came: stale hook episodes, and connection episodes no live server holds.

Stdlib only, and lean: a hook's `start` runs this for its worktree whenever another episode is open there (a
person running several agents at once), so moments are epoch seconds (no `datetime`) and the root is whatever
path the caller has (no `pathlib`, whose imports cost a start ~5 ms).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from majordomus.episodes import store
from majordomus.episodes.boundary import close_episode, finish_start
from majordomus.episodes.store import update_open
from majordomus.episodes.vanished import REASON as VANISHED
from majordomus.episodes.vanished import gone_client
from majordomus.identity import epoch_of, is_live_majordomus, now_s, process_namespace, rfc3339, worktree_id
from majordomus.layout import Layout
from majordomus.policy import cached_values

if TYPE_CHECKING:
    from pathlib import Path
    from typing import Literal

    Verdict = Literal["live", "held", "orphaned", "detached", "expired", "stale"]


def classify(opened: store.OpenFile, now: float, *, stale_after: float, grace: float) -> Verdict:
    """What an open episode is now — the one rule recover acts on and doctor reports.

    A hook episode is `live` until idle past `stale_after`, then `stale`. A connection episode is `held`
    while a live server holds it, or the live bridge its client speaks through (a killed server's bridges
    elect a new one and resume it); else `orphaned` (its server was killed before marking it), `detached`
    within the grace, `expired` past it. `now` is epoch seconds; `stale_after` and `grace` are seconds.
    """
    if opened.is_connection:
        if is_live_majordomus(opened.held_by) or is_live_majordomus(opened.bridge):
            return "held"
        detached = epoch_of(str(opened.detached_at))
        if detached is None:
            return "orphaned"
        return "detached" if now - detached <= grace else "expired"
    last = epoch_of(str(opened.last_activity_at or opened.started_at))
    return "stale" if last is not None and now - last > stale_after else "live"


def is_here(opened: store.OpenFile, here: str) -> bool:
    """An episode of this worktree (an older open file without `worktree_id` counts as here)."""
    return opened.worktree_id in (None, here)


def recover(root: Path, *, dry_run: bool = False, hooks: bool = True, connections: bool = True) -> list[str]:
    """One line per episode acted on (or that would be, with dry_run)."""
    layout = Layout(root)
    layout.refuse_links()
    policy = cached_values(layout)
    now = now_s()
    stale_after = policy["session.stale_after_hours"] * 3600
    grace = policy["episodes.reattach_grace_seconds"]
    here = worktree_id(root)
    lines: list[str] = []
    namespace = process_namespace()
    for episode in list(store.open_episodes(layout)):
        opened = episode.file
        ps = opened.provider_session
        if not is_here(opened, here) or ps is None or not (connections if opened.is_connection else hooks):
            continue
        why = gone_client(opened, namespace)
        if why is not None:  # by evidence, before any bound of time
            if dry_run:
                lines.append(f"would close {opened.session_id} (interrupted, reason {VANISHED}): {why}")
            else:
                line = close_episode(layout, ps, VANISHED, "interrupted", evidence=why, client=opened.client)
                lines.append(f"{line}: {why}" if line.startswith("episode closed") else line)
            continue
        verdict = classify(opened, now, stale_after=stale_after, grace=grace)
        if verdict in ("orphaned", "expired") and opened.is_connection and not dry_run:
            finish_start(layout, ps)  # its server may have been killed inside the start, before the ledger line
        if verdict == "orphaned":
            # its server was killed: the grace runs from the first start-up or recover that sees it
            lines.append(f"episode {opened.session_id} ({ps}) has no live server; detached from {rfc3339(now)}")
            if not dry_run:
                update_open(layout, ps, held_by=None, detached_at=rfc3339(now))
        elif verdict in ("expired", "stale"):
            lines.append(_close(layout, ps, opened.session_id, verdict, dry_run))
    return lines


def _close(layout: Layout, provider_session: str, sid: str, reason: str, dry_run: bool) -> str:
    if dry_run:
        return f"would close {sid} (interrupted, reason {reason})"
    return close_episode(layout, provider_session, reason, "interrupted")
