"""The episode store on disk: open-episode files, closed records, working contexts — their formats and readers,
and the read-modify-write of an open file under its session's lock (a prompt refreshes one without the boundary).

Values are written as JSON scalars, which are valid YAML, so a YAML reader and this stdlib reader agree.
Stdlib only: the hook path reads and writes these.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING

from majordomus.identity import now_s, rfc3339, session_key, sha256
from majordomus.layout import Layout, file_lock, write_atomic
from majordomus.simple_yaml import front_matter, parse_simple_yaml, yaml_lines

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path
    from typing import Any

CONNECTION_PROVIDER = "generic"  # the provider whose episodes the MCP connection draws (SPEC 4.1)


def _text(found: Any) -> str | None:
    """A string member as the readers want it.

    A number written by hand reads as its spelling, anything else as absent.
    """
    if isinstance(found, str):
        return found
    if isinstance(found, (int, float)) and not isinstance(found, bool):
        return str(found)
    return None


def _count(found: Any) -> int:
    """A counter: a non-negative integer, or 0 for anything else (a corrupt count must never stop a close)."""
    return found if isinstance(found, int) and not isinstance(found, bool) and found >= 0 else 0


TURN_STATES = ("completed", "running", "none")


def _pid(found: Any) -> int | None:
    """A pid as written by the board; anything else (an edit, a boolean) reads as absent."""
    return found if isinstance(found, int) and not isinstance(found, bool) and found > 0 else None


def _turn(found: Any) -> str | None:
    """A turn state as written by capture; anything else (an edit, an old file) reads as absent."""
    return found if isinstance(found, str) and found in TURN_STATES else None


@dataclass(frozen=True)
class OpenFile:
    """`sessions-open/<key>.yaml`: one open episode, from its start to its close (SPEC 4.1)."""

    session_id: str
    started_at: str | None = None
    provider: str | None = None
    provider_session: str | None = None
    owner: str | None = None
    repository_id: str | None = None
    worktree: str | None = None
    worktree_id: str | None = None
    branch: str | None = None
    start_head: str | None = None
    start_working_tree: str | None = None
    last_activity_at: str | None = None
    compactions: int = 0
    held_by: int | None = None  # the pid of the server that holds a connection episode
    detached_at: str | None = None
    last_turn: str | None = None  # running from a captured prompt until the client's end-of-turn, then completed
    attachments: int = 0  # a connection episode's attachments across every server that held it
    client: str | None = None  # `<pid>@<start ticks>` of the client process that ran a hook start
    client_namespace: str | None = None  # the boot and pid namespace in which `client` names that process
    bridge: int | None = None  # the pid of the bridge whose client holds a connection episode through a server
    extra: tuple[tuple[str, Any], ...] = ()  # members beside the fixed ones (`source`), kept in their order

    @property
    def is_connection(self) -> bool:
        return self.provider == CONNECTION_PROVIDER

    def with_extra(self, key: str, item: Any) -> OpenFile:
        return replace(self, extra=(*((k, v) for k, v in self.extra if k != key), (key, item)))

    def to_bytes(self) -> bytes:
        own = {f.name: getattr(self, f.name) for f in fields(self)}
        pairs = [(k, own[k]) for k in OPEN_FIELDS] + list(self.extra)
        return ("\n".join(yaml_lines(pairs)) + "\n").encode("utf-8")

    @classmethod
    def from_members(cls, members: dict[str, Any]) -> OpenFile | None:
        """The open file's fields, each read as its type; None without a session id (nothing can close it)."""
        sid = members.get("session_id")
        if not isinstance(sid, str) or not sid:
            return None
        return cls(session_id=sid, **{k: _text(members.get(k)) for k in OPEN_FIELDS[1:12]},
                   compactions=_count(members.get("compactions")),
                   held_by=_pid(members.get("held_by")),
                   detached_at=_text(members.get("detached_at")),
                   last_turn=_turn(members.get("last_turn")),
                   attachments=_count(members.get("attachments")),
                   client=_text(members.get("client")),
                   client_namespace=_text(members.get("client_namespace")),
                   bridge=_pid(members.get("bridge")),
                   extra=tuple((k, v) for k, v in members.items() if k not in OPEN_FIELDS))


OPEN_FIELDS = tuple(name for name in OpenFile.__match_args__ if name != "extra")


def read_open_file(path: Path) -> OpenFile | None:
    try:
        members = parse_simple_yaml(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return None
    return OpenFile.from_members(members)


def read_open(layout: Layout, provider_session: str) -> OpenFile | None:
    """The open episode of a provider session, strictly by the one sanitizer; None when there is none."""
    return read_open_file(layout.open_file(session_key(provider_session)))


def read_pointer(layout: Layout) -> str | None:
    """The episode `session-current.yaml` points at (the one opened here last), or None."""
    try:
        found = parse_simple_yaml(layout.session_current.read_text(encoding="utf-8")).get("session_id")
    except (OSError, UnicodeDecodeError):
        return None
    return found if isinstance(found, str) else None


@dataclass(frozen=True)
class OpenEpisode:
    key: str
    path: Path
    file: OpenFile


def listed(directory: Path, suffix: str) -> list[str]:
    """The names in `directory` ending in `suffix`, sorted, without hidden files (temp files, logs);
    none when the directory is not there yet."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return sorted(n for n in names if n.endswith(suffix) and not n.startswith("."))


def open_episodes(layout: Layout) -> Iterator[OpenEpisode]:
    for name in listed(layout.sessions_open, ".yaml"):
        path = layout.sessions_open / name
        found = read_open_file(path)
        if found is not None:
            yield OpenEpisode(key=name[: -len(".yaml")], path=path, file=found)


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


SESSION_SCHEMA = "session/v1"


def _texts(found: Any) -> tuple[str, ...]:
    return tuple(str(x) for x in found if isinstance(x, (str, int))) if isinstance(found, list) else ()


@dataclass(frozen=True)
class SessionRecord:
    """`.ai/repo/sessions/<…>.md`: a closed episode, written once and never rewritten (SPEC 4.2)."""

    session_id: str
    provider: str | None
    started_at: str | None
    closed_at: str | None
    outcome: str | None  # closed | interrupted
    end_reason: str | None
    repository_id: str | None
    worktree_id: str | None
    branch: str | None
    start_head: str | None
    head: str | None
    start_working_tree: str | None
    working_tree: str | None
    changed_files: tuple[str, ...] = ()
    commits: tuple[str, ...] = ()
    compactions: int = 0
    last_turn: str = "none"  # completed | running | none: the client's last turn when the episode ended
    title: str | None = None
    truncated: tuple[str, ...] = ()  # the lists that were cut short; written only when one was
    end_evidence: str | None = None  # what showed that the end came (a vanished client); written only when known

    def to_text(self) -> str:
        own = {f.name: getattr(self, f.name) for f in fields(self)}
        pairs: list[tuple[str, Any]] = [("schema", SESSION_SCHEMA), ("kind", "session")]
        for name, item in own.items():
            if name in ("truncated", "end_evidence") and not item:
                continue
            pairs.append((name, list(item) if isinstance(item, tuple) else item))
        return "\n".join(["---", *yaml_lines(pairs), "---", ""]) + "\n"

    @classmethod
    def from_front_matter(cls, meta: dict[str, Any]) -> SessionRecord | None:
        sid = meta.get("session_id")
        if meta.get("kind") != "session" or not isinstance(sid, str):
            return None
        scalars = ("provider", "started_at", "closed_at", "outcome", "end_reason", "repository_id", "worktree_id",
                   "branch", "start_head", "head", "start_working_tree", "working_tree")
        return cls(session_id=sid, **{k: _text(meta.get(k)) for k in scalars},
                   changed_files=_texts(meta.get("changed_files")), commits=_texts(meta.get("commits")),
                   compactions=_count(meta.get("compactions")), last_turn=_turn(meta.get("last_turn")) or "none",
                   title=_text(meta.get("title")),
                   truncated=_texts(meta.get("truncated")), end_evidence=_text(meta.get("end_evidence")))


def closed_records(layout: Layout) -> Iterator[tuple[Path, SessionRecord]]:
    for name in listed(layout.sessions_dir, ".md"):
        if name == "README.md":
            continue
        path = layout.sessions_dir / name
        try:
            found = SessionRecord.from_front_matter(front_matter(path.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError):
            continue
        if found is not None:
            yield path, found


@dataclass(frozen=True)
class WorkingContext:
    """What a frozen working context says of its episode: its provider session, its opening, its close once closed."""

    session_id: str
    provider: str | None
    provider_session: str | None
    opened_at: str
    closed_at: str | None
    worktree_id: str | None


def working_contexts(layout: Layout) -> Iterator[WorkingContext]:
    """Tier-2 evidence: each working context names its provider session and (once closed) its close."""
    for name in listed(layout.contexts_dir, ".md"):
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
        yield WorkingContext(session_id=sid, provider=_text(meta.get("provider")),
                             provider_session=_text(meta.get("provider_session")), opened_at=opened,
                             closed_at=closed if isinstance(closed, str) else None,
                             worktree_id=_text(meta.get("worktree_id")))


LOCK_STRIPES = 256


def session_lock(layout: Layout, key: str) -> Path:
    """The lock of a session: one of 256 files, picked by a digest of its key. A file per session left one file
    per session ever in the locks directory, and cost every new episode a file create (an attach's slowest step
    on an ext4 that scans past recently freed inodes). Two sessions that share a file wait for each other's
    boundaries only, and no path holds two session locks at once (or a session lock inside another lock)."""
    return layout.locks / f"session.{sha256(key.encode()).digest()[0] % LOCK_STRIPES:02x}.lock"


def update_open(layout: Layout, provider_session: str, *, sync: bool = True, **changes: Any) -> bool:
    """Read-modify-write one open file under its lock; False when no episode is open under that key."""
    key = session_key(provider_session)
    with file_lock(session_lock(layout, key)):
        path = layout.open_file(key)
        opened = read_open_file(path)
        if opened is None:
            return False
        write_atomic(path, replace(opened, **changes).to_bytes(), sync=sync)
    return True


def touch_activity(layout: Layout, provider_session: str, *, starts_turn: bool = True) -> bool:
    """A captured prompt of an open episode refreshes its `last_activity_at` (SPEC 4.4) and starts a turn; one read
    at its task's start (Cline's first message) does not: that turn's end hook runs beside the start hook and may
    have recorded it completed already."""
    # no fsync: what a crash can lose here is rebuilt or moot (docs/decisions.md: what the hooks fsync)
    turn = {"last_turn": "running"} if starts_turn else {}
    return update_open(layout, provider_session, sync=False, last_activity_at=rfc3339(now_s()), **turn)
