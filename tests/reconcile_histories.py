"""Histories for reconcile: evidence and prompt records written as the real writers lay them out, and a
hypothesis strategy drawing whole multi-session histories (shared by the reconcile tests and the two-part test
of archive/test_two_processes.py)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

from hypothesis import strategies as st

from majordomus.archive import record as rec
from majordomus.episodes import store
from majordomus.identity import rfc3339, session_key, worktree_id
from majordomus.layout import Layout
from majordomus.simple_yaml import yaml_lines

BASE = datetime(2026, 1, 1, tzinfo=timezone.utc)
NOW = BASE + timedelta(seconds=5000)


def at(seconds: int) -> str:
    return rfc3339(BASE + timedelta(seconds=seconds))


class History:
    """Writes evidence and prompt records into a layout the way the real writers lay them out."""

    def __init__(self, root: Path) -> None:
        self.layout = Layout(root)
        for d in (self.layout.sessions_open, self.layout.contexts_dir, self.layout.sessions_dir,
                  self.layout.prompts_dir, self.layout.locks):
            d.mkdir(parents=True, exist_ok=True)
        self.here = worktree_id(root)
        self.count = 0

    def open_episode(self, sid: str, ps: str, opened: int, provider: str = "claude-code") -> None:
        opened_file = store.OpenFile(session_id=sid, started_at=at(opened), provider=provider, provider_session=ps,
                                     worktree_id=self.here)
        (self.layout.open_file(session_key(ps))).write_bytes(opened_file.to_bytes())

    def context(self, sid: str, ps: str, opened: int, closed: int | None, provider: str = "claude-code") -> None:
        meta = [("schema", "session-context/v1"), ("kind", "session-context"), ("session_id", sid),
                ("opened_at", at(opened)), ("provider", provider), ("provider_session", ps),
                ("worktree_id", self.here)]
        text = "---\n" + "\n".join(yaml_lines(meta)) + "\n---\n# Working context\n"
        if closed is not None:
            close = yaml_lines([("closed_at", at(closed)), ("outcome", "closed")])
            text += "\n## Close\n" + "\n".join(close) + "\n"
        (self.layout.contexts_dir / f"{at(opened)}--{sid}.md").write_text(text)

    def closed_record(self, sid: str, opened: int, closed: int, provider: str = "claude-code",
                      worktree: str | None = None) -> None:
        meta = [("schema", "session/v1"), ("kind", "session"), ("session_id", sid), ("provider", provider),
                ("started_at", at(opened)), ("closed_at", at(closed)), ("outcome", "closed"),
                ("worktree_id", worktree or self.here)]
        text = "---\n" + "\n".join(yaml_lines(meta)) + "\n---\n"
        (self.layout.sessions_dir / f"{at(closed)}--{sid}--main--aaaaaaa--0000.md").write_text(text)

    def prompt(self, moment: int, ps: str | None, link: str | None = "orphan", episode: str | None = None,
               provider: str = "claude-code", legacy: bool = False) -> str:
        self.count += 1
        record = {"schema": rec.SCHEMA, "started_at": at(moment), "provider": provider, "event": "UserPromptSubmit",
                  "id": None, "session": ps, "episode": episode, "episode_link": link,
                  "repository_id": "r", "worktree_id": self.here, "source": None, "cwd": None, "branch": "main",
                  "head": "NONE", "text": f"prompt {self.count}"}
        if legacy:  # as an older version wrote it: no provenance, no identity, the root path instead
            for key in ("episode", "episode_link", "repository_id", "worktree_id"):
                del record[key]
            record["repository"] = str(self.layout.root)
        name = f"{(BASE + timedelta(seconds=moment)):%Y%m%d%H%M%S}-prompt-{self.count}.json"
        (self.layout.prompts_dir / name).write_bytes(rec.dumps(rec.PromptRecord.from_members(record)))
        return name

    def read(self, name: str) -> dict:
        return json.loads((self.layout.prompts_dir / name).read_text())


EVIDENCE = st.sampled_from(["context", "context-no-close", "record-only", "foreign"])


@st.composite
def histories(draw: st.DrawFn, spread: int = 60, evidence: st.SearchStrategy[str] = EVIDENCE,
              gathered: bool = False) -> dict:
    """Sessions with up to three episodes each and prompts among them; `spread` small makes many events share
    a second (the boundary SPEC 5.4 says time alone cannot order). `gathered`: a session's prompts fall in or
    just around one of its episodes, so that tier 3 (a whole span inside one closed episode) has work."""
    sessions = []
    for n in range(draw(st.integers(1, 3))):
        t = draw(st.integers(0, min(spread, 50))) + (n * 100 * spread if gathered else 0)  # gathered: apart
        episodes = []
        for k in range(draw(st.integers(0, 3))):
            opened = t + draw(st.integers(0, spread))
            closed = opened + draw(st.integers(0, 2 * spread))
            episodes.append({"sid": f"s-{n}-{k}", "opened": opened, "closed": closed, "evidence": draw(evidence)})
            t = closed  # the next may open the very second this one closed
        if episodes and not gathered and draw(st.booleans()):
            episodes[-1]["evidence"] = "open"
            episodes[-1]["closed"] = None
        sessions.append({"ps": f"ps-{n}", "episodes": episodes})
    named = st.sampled_from([s["ps"] for s in sessions] + [None])
    prompts = draw(st.lists(st.tuples(st.integers(0, 12 * spread), named,
                                      st.sampled_from(["orphan", "legacy", "bogus"])), max_size=12))
    if gathered:
        chosen = {s["ps"]: draw(st.sampled_from(s["episodes"])) for s in sessions if s["episodes"]}
        for k, (_, ps, kind) in enumerate(prompts):
            if ps in chosen and chosen[ps]["closed"] is not None:
                e = chosen[ps]
                inside = e["closed"] - e["opened"] >= 2 and draw(st.integers(0, 9)) > 0  # now and then one out
                low, high = (e["opened"] + 1, e["closed"] - 1) if inside else (max(0, e["opened"] - 2), e["closed"] + 2)
                prompts[k] = (draw(st.integers(low, high)), ps, kind)
    return {"sessions": sessions, "prompts": prompts}


def build(root: Path, history: dict) -> tuple[History, dict[str, tuple[str, int, int]], list[str]]:
    """Writes a drawn history into a layout at `root`: its evidence, its prompts; gives the writer, each
    episode's (provider session, opened, closed) window and the prompt records' names in drawn order."""
    h = History(root)
    windows: dict[str, tuple[str, int, int]] = {}
    for s in history["sessions"]:
        for e in s["episodes"]:
            ps, sid, opened, closed = s["ps"], e["sid"], e["opened"], e["closed"]
            windows[sid] = (ps, opened, closed if closed is not None else 10**9)
            if e["evidence"] == "open":
                h.open_episode(sid, ps, opened)
                h.context(sid, ps, opened, None)
            elif e["evidence"] == "context":
                h.context(sid, ps, opened, closed)
                h.closed_record(sid, opened, closed)
            elif e["evidence"] == "context-no-close":
                h.context(sid, ps, opened, None)
                h.closed_record(sid, opened, closed)
            elif e["evidence"] == "record-only":
                h.closed_record(sid, opened, closed)
            else:
                h.closed_record(sid, opened, closed, worktree="f" * 16)
    names = []
    for moment, ps, kind in history["prompts"]:
        if kind == "legacy":
            names.append(h.prompt(moment, ps, legacy=True))
        else:
            names.append(h.prompt(moment, ps, link="orphan" if kind == "orphan" else "nearest-guess"))
    return h, windows, names
