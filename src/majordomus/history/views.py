"""The JSON shapes of the history: what `episodes --json`, `show --json` and `search --json` print, and what the
registry's history capabilities answer (capabilities/history.py). Built here once, so the two cannot drift.

The readers are the room's own (`timeline`, `detail`, `index`); this module only selects and shapes. It opens
the search index, so it imports `sqlite3`: the capabilities import it inside their handlers, never at start-up.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from majordomus.history import detail, index
from majordomus.history.timeline import Episode, Filters, all_episodes, select
from majordomus.layout import Layout
from majordomus.usage.episode import Usage, policy_overrides, usage_json, usages
from majordomus.usage.prices import Price

if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

EPISODES_SCHEMA = "majordomus.episodes/v1"
SHOW_SCHEMA = "majordomus.show/v1"
SEARCH_SCHEMA = "majordomus.search/v1"
HIGHLIGHT = ("**", "**")


@dataclass(frozen=True)
class Listing:
    """The episodes the filters admit, newest first, with their linked prompt counts; `note` when the index was
    rebuilt (the command prints it on stderr)."""

    episodes: tuple[Episode, ...]
    counts: dict[str, int]
    note: str | None
    usages: dict[str, Usage]
    prices: dict[str, Price]  # the policy's rows over the table's

    def to_json(self, root: Path) -> dict[str, Any]:
        return {"schema": EPISODES_SCHEMA, "count": len(self.episodes),
                "episodes": [e.to_json(self.counts.get(e.id, 0), root)
                             | {"usage": usage_json(self.usages[e.id], self.prices)} for e in self.episodes]}


def listing(layout: Layout, filters: Filters) -> Listing:
    idx = index.opened(layout)
    try:
        note = idx.note
        counts = idx.prompt_counts()
    finally:
        idx.close()
    chosen = tuple(select(all_episodes(layout), filters))
    return Listing(chosen, counts, note, usages(layout, chosen), policy_overrides(layout))


# -- one episode ----------------------------------------------------------------------------------------------
def withheld_name(name: str) -> str:
    """A record's file name without its slug, which is the opening of the prompt's text: `<stamp>-….json`."""
    stamp = name[:14]
    return f"{stamp}-….json" if stamp.isdigit() else "….json"


def withhold(data: dict[str, Any]) -> dict[str, Any]:
    """The prompts of a whole episode without their texts: `text` null, `text_withheld` true, and the record's
    name cut to its capture stamp (the rest of it is the opening of the text)."""
    for p in data["prompts"]:
        p["record"] = withheld_name(p["record"])
        if "text" in p:
            p["text"] = None
            p["text_withheld"] = True
    return data


def whole(layout: Layout, e: Episode, *, with_prompts: bool = True) -> tuple[dict[str, Any], str | None]:
    """`show --json` of one episode, and the index's rebuild note."""
    idx = index.opened(layout)
    try:
        note = idx.note
        names = idx.prompt_names(e.id)
    finally:
        idx.close()
    data = {"schema": SHOW_SCHEMA, **detail.whole(layout, e, names)}
    return (data if with_prompts else withhold(data)), note


def commit_sentence(commit: detail.CommitInfo, found: list[detail.Candidate]) -> str:
    if len(found) == 1:
        return f"commit {commit.sha[:12]} ({commit.subject}) is {found[0].evidence}"
    if found:
        return (f"commit {commit.sha[:12]} ({commit.subject}) is ambiguous: {len(found)} episodes' windows "
                "contain it, and none is chosen")
    return (f"commit {commit.sha[:12]} ({commit.subject}), committed {commit.committed_at}, is inside no "
            "episode's window: no recorded episode was open when it was made and led to it")


def of_commit(layout: Layout, episodes: list[Episode], commit: detail.CommitInfo
              ) -> tuple[dict[str, Any], list[detail.Candidate]]:
    """`show --json <commit>`: the episodes whose window produced it, on evidence; and the candidates."""
    found = detail.episodes_of_commit(layout, episodes, commit)
    data = {"schema": SHOW_SCHEMA, "commit": commit.sha, "subject": commit.subject,
            "committed_at": commit.committed_at, "ambiguous": len(found) > 1,
            "message": commit_sentence(commit, found),
            "candidates": [{"episode": c.episode.to_json(0, layout.root) | {"prompts": None},
                            "evidence": c.evidence} for c in found]}
    return data, found


def candidates_sentence(arg: str, found: list[Episode], commit: detail.CommitInfo | None = None,
                        most: int = 20) -> str:
    """`'<arg>' is ambiguous: …` with each candidate episode (id, provider, state, start)."""
    from majordomus.history.text import when

    what = f"{len(found)} episode(s)" + (f" and commit {commit.sha[:12]} ({commit.subject})" if commit else "")
    names = "; ".join(f"{e.id} ({e.provider or '-'}, {e.state}, {when(e.started_at)})" for e in found[:most])
    more = f"; and {len(found) - most} more" if len(found) > most else ""
    return f"'{arg}' is ambiguous: it names {what}: {names}{more}"


# -- search ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Found:
    """What a search found: the hits the filters admit (with their episodes), how many matched without the
    filters, the index totals when nothing matched at all, and the rebuild note."""

    chosen: tuple[tuple[index.Hit, Episode | None], ...]
    matched: int
    totals: tuple[int, int] | None
    note: str | None
    usages: dict[str, Usage]  # of the chosen hits' episodes
    prices: dict[str, Price]

    def to_json(self, query: str) -> dict[str, Any]:
        on, off = HIGHLIGHT
        return {"schema": SEARCH_SCHEMA, "query": query, "count": len(self.chosen), "highlight": list(HIGHLIGHT),
                "results": [{"kind": h.kind, "record": h.name, "episode": h.episode,
                             "episode_state": e.state if e else None, "at": h.at, "provider": h.provider,
                             "branch": h.branch, "episode_link": h.link if h.kind == "prompt" else None,
                             "pruned": h.pruned, "rank": round(h.rank, 6),
                             "snippet": marked(h.snippet, on, off),
                             "episode_usage": self.usage_of(e)} for h, e in self.chosen]}

    def usage_of(self, e: Episode | None) -> dict[str, Any] | None:
        """A hit's episode's usage, in the shape of `episodes --json` (None for a hit without an episode)."""
        return None if e is None else usage_json(self.usages[e.id], self.prices)


def marked(snippet: str, on: str, off: str) -> str:
    return " ".join(snippet.replace(index.OPEN, on).replace(index.CLOSE, off).split())


def search(layout: Layout, query: str, filters: Filters) -> Found:
    """The hits of an FTS5 `query`, best first, that pass `filters` (a prompt by its own provider, branch and
    time; by its episode's outcome and open state), at most `filters.limit` of them."""
    index.check_query(query)  # a usage error before the index is touched
    idx = index.opened(layout)
    try:
        note = idx.note
        hits = list(idx.search(query))
        totals = idx.totals() if not hits else None
    finally:
        idx.close()
    episodes = {e.id: e for e in all_episodes(layout)} if hits else {}
    chosen: list[tuple[index.Hit, Episode | None]] = []
    for h in hits:
        e = episodes.get(h.episode) if h.episode else None
        if h.kind == "episode":
            if e is None or not filters.admits(e):
                continue
        else:
            if filters.provider is not None and h.provider != filters.provider:
                continue
            if filters.branch is not None and h.branch != filters.branch:
                continue
            if not filters.admits_time(h.at):
                continue
            if filters.narrows_episodes and (e is None or not filters.admits(e)):
                continue
        chosen.append((h, e))
        if filters.limit is not None and len(chosen) >= filters.limit:
            break
    their = {e.id: e for _, e in chosen if e is not None}
    return Found(tuple(chosen), len(hits), totals, note, usages(layout, their.values()) if their else {},
                 policy_overrides(layout) if their else {})


def literal(words: str) -> str:
    """Plain words as an FTS5 query that always parses: each whitespace-separated word one quoted phrase (all
    must match, as unquoted words do)."""
    return " ".join('"' + w.replace('"', '""') + '"' for w in words.split())
