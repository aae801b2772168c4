"""The episode store on disk: open-episode files, closed records, working contexts — their formats and readers.

Values are written as JSON scalars, which are valid YAML, so a YAML reader and this stdlib reader agree.
Stdlib only: the hook path reads and writes these.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

from majordomus.identity import session_key
from majordomus.simple_yaml import front_matter, parse_simple_yaml, yaml_lines
from majordomus.layout import Layout
from majordomus.values import value

OPEN_FIELDS = ("session_id", "started_at", "provider", "provider_session", "owner", "repository_id",
               "worktree", "worktree_id", "branch", "start_head", "start_working_tree", "last_activity_at",
               "compactions", "held_by", "detached_at")


def render_open(fields: dict[str, Any]) -> bytes:
    ordered = [(k, fields.get(k)) for k in OPEN_FIELDS]
    extra = [(k, v) for k, v in fields.items() if k not in OPEN_FIELDS]
    return ("\n".join(yaml_lines(ordered + extra)) + "\n").encode("utf-8")


def read_open_file(path: Path) -> dict[str, Any] | None:
    try:
        data = parse_simple_yaml(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return None
    return data if isinstance(data.get("session_id"), str) else None


def read_open(layout: Layout, provider_session: str) -> dict[str, Any] | None:
    """The open episode of a provider session, strictly by the one sanitizer; None when there is none."""
    return read_open_file(layout.open_file(session_key(provider_session)))


@value
class OpenEpisode:
    key: str
    path: Path
    fields: dict[str, Any]


def open_episodes(layout: Layout) -> Iterator[OpenEpisode]:
    try:
        names = sorted(os.listdir(layout.sessions_open))
    except FileNotFoundError:
        return
    for name in names:
        if not name.endswith(".yaml") or name.startswith("."):
            continue
        path = layout.sessions_open / name
        fields = read_open_file(path)
        if fields is not None:
            yield OpenEpisode(key=name[: -len(".yaml")], path=path, fields=fields)


def find_record(layout: Layout, session_id: str) -> Path | None:
    """The closed record of an episode, by the id in its file name (the id is the identity)."""
    try:
        names = os.listdir(layout.sessions_dir)
    except FileNotFoundError:
        return None
    marker = f"--{session_id}--"
    for name in names:
        if marker in name and name.endswith(".md") and not name.startswith("."):
            return layout.sessions_dir / name
    return None


@value
class Window:
    """One episode's span: from its opening to its close (None while it is still open)."""

    session_id: str
    provider: str | None
    provider_session: str | None
    opened_at: str
    closed_at: str | None
    worktree_id: str | None


def closed_records(layout: Layout) -> Iterator[tuple[Path, dict[str, Any]]]:
    try:
        names = sorted(os.listdir(layout.sessions_dir))
    except FileNotFoundError:
        return
    for name in names:
        if not name.endswith(".md") or name.startswith(".") or name == "README.md":
            continue
        path = layout.sessions_dir / name
        try:
            meta = front_matter(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError):
            continue
        if meta.get("kind") == "session" and isinstance(meta.get("session_id"), str):
            yield path, meta


def context_windows(layout: Layout) -> Iterator[Window]:
    """Tier-2 evidence: each working context names its provider session and (once closed) its close."""
    try:
        names = sorted(os.listdir(layout.contexts_dir))
    except FileNotFoundError:
        return
    for name in names:
        if not name.endswith(".md") or name.startswith("."):
            continue
        try:
            text = (layout.contexts_dir / name).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        meta = front_matter(text)
        sid, opened = meta.get("session_id"), meta.get("opened_at")
        if not isinstance(sid, str) or not isinstance(opened, str):
            continue
        closed = None
        marker = text.rfind("\n## Close\n")
        if marker != -1:
            closed = parse_simple_yaml(text[marker + 10:]).get("closed_at")
        yield Window(session_id=sid, provider=meta.get("provider"), provider_session=meta.get("provider_session"),
                     opened_at=opened, closed_at=closed if isinstance(closed, str) else None,
                     worktree_id=meta.get("worktree_id"))
