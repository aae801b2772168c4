"""Closes episodes whose end never came: stale hook episodes, and connection episodes no live server holds.

Stdlib only: a hook's `start` runs this for its worktree.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from majordomus.episodes import store
from majordomus.episodes.boundary import close_episode, update_open
from majordomus.identity import is_live_majordomus, now_utc, parse_rfc3339, rfc3339, worktree_id
from majordomus.layout import Layout
from majordomus.policy import cached_values


def recover(root: Path, *, dry_run: bool = False, hooks: bool = True, connections: bool = True) -> list[str]:
    """One line per episode acted on (or that would be, with dry_run)."""
    layout = Layout(root)
    policy = cached_values(layout)
    now = now_utc()
    stale_after = timedelta(hours=policy["session.stale_after_hours"])
    grace = timedelta(seconds=policy["episodes.reattach_grace_seconds"])
    here = worktree_id(root)
    lines: list[str] = []
    for episode in list(store.open_episodes(layout)):
        f = episode.fields
        if f.get("worktree_id", here) != here:
            continue
        ps = f.get("provider_session")
        if not isinstance(ps, str):
            continue
        if f.get("provider") == "generic":
            if not connections or is_live_majordomus(f.get("held_by")):
                continue
            detached = parse_rfc3339(str(f.get("detached_at")))
            if detached is None:
                # its server was killed: the grace runs from the first start-up or recover that sees it
                lines.append(f"episode {f['session_id']} ({ps}) has no live server; detached from {rfc3339(now)}")
                if not dry_run:
                    update_open(layout, ps, held_by=None, detached_at=rfc3339(now))
                continue
            if now - detached <= grace:
                continue
            lines.append(_close(layout, ps, f["session_id"], "expired", dry_run))
        elif hooks:
            last = parse_rfc3339(str(f.get("last_activity_at") or f.get("started_at")))
            if last is None or now - last <= stale_after:
                continue
            lines.append(_close(layout, ps, f["session_id"], "stale", dry_run))
    return lines


def _close(layout: Layout, provider_session: str, sid: str, reason: str, dry_run: bool) -> str:
    if dry_run:
        return f"would close {sid} (interrupted, reason {reason})"
    return close_episode(layout, provider_session, reason, "interrupted")
