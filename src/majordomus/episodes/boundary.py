"""The one writer of episode boundaries: start, end, compact — for hook shims and the connection board alike.

Each function takes an admitted boundary and returns what it did; `episodes.hook` is the way in from a
payload. Stdlib only: this runs inside a person's hooks.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from majordomus import ledger
from majordomus.clients.providers import Provider
from majordomus.episodes import store
from majordomus.errors import InternalError, MajordomusError
from majordomus.identity import (
    CHANGED_FILES,
    compact_stamp,
    git_argv,
    git_seconds,
    head_state,
    name_key,
    new_episode_id,
    now_s,
    now_utc,
    owner,
    parse_rfc3339,
    repository_id,
    rfc3339,
    run_bounded,
    session_key,
    tree_state,
    worktree_id,
)
from majordomus.layout import (
    Layout,
    append_line,
    create_exclusive,
    ensure_dir,
    file_lock,
    fsync_dir,
    sweep_stale_temps,
    write_atomic,
)
from majordomus.redact import scrub
from majordomus.simple_yaml import front_matter, yaml_lines

if TYPE_CHECKING:
    from collections.abc import Callable
    from datetime import datetime
    from pathlib import Path
    from typing import Any

LIST_LIMIT = 200  # changed files and commits kept in a record; the record says when a list was cut
END_GIT_SECONDS = 0.8  # every git call of one close together: Codex gives the whole hook 1 s
ListState = str  # complete | limit | timeout | failed
SAFE_ID_FIRST = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
SAFE_ID_REST = SAFE_ID_FIRST | {"_", "-"}


def is_safe_id(sid: str) -> bool:
    """What an episode id may be in a file name: `[A-Za-z0-9][A-Za-z0-9_-]{0,127}` (without `re`: a hook)."""
    return 0 < len(sid) <= 128 and sid[0] in SAFE_ID_FIRST and all(c in SAFE_ID_REST for c in sid[1:])
STATUS_REUSE_SECONDS = 1.0  # how old a server's last `git status` may be for the next connection start
def _list_seconds() -> float:
    """What git may spend on each list at the close: 0.5 s (MAJORDOMUS_GIT_LIST_SECONDS narrows it in tests)."""
    try:
        seconds = float(os.environ.get("MAJORDOMUS_GIT_LIST_SECONDS", "0.5"))
    except ValueError:
        return 0.5
    return seconds if 0 < seconds <= 0.5 else 0.5


@dataclass(frozen=True)
class Boundary:
    """What an admitted payload says, whatever client it came from."""

    provider: Provider
    event: str
    provider_session: str | None
    source: str | None
    reason: str | None


def log_failure(layout: Layout, text: str) -> None:
    """The log beside the working contexts; doctor reports it while it is non-empty."""
    try:
        ensure_dir(layout.contexts_dir)
        append_line(layout.context_log, f"{rfc3339(now_s())} {text}")
    except (OSError, MajordomusError):
        pass  # the hook must still exit 0; nothing else is left to tell


def _rel(layout: Layout, path: Path) -> str:
    return str(path.relative_to(layout.root))


@dataclass(frozen=True)
class Drawn:
    """What one boundary did: the report line, and whether it opened a new episode (and which)."""

    line: str
    opened: bool = False
    session_id: str | None = None
    started_at: str | None = None


def start_episode(layout: Layout, b: Boundary, *, held_by: int | None = None, client: str | None = None,
                  client_namespace: str | None = None) -> Drawn:
    """Open the episode of a provider session, or keep the one open; `held_by` is the holding server's pid,
    `client` the client process that ran the hook (how an attach from the same sitting finds this episode, and
    how a later command sees that the client vanished), `client_namespace` where that pid means that process."""
    assert b.provider_session is not None
    key = session_key(b.provider_session)
    with file_lock(store.session_lock(layout, key)):
        existing = store.read_open_file(layout.open_file(key))
        if existing is not None:
            if client is not None and existing.client != client:  # the same session, run by a new process
                write_atomic(layout.open_file(key), replace(existing, client=client,
                                                            client_namespace=client_namespace).to_bytes(),
                             sync=False)
            _finish_start(layout, existing)
            return Drawn(f"session {existing.session_id} already open here since {existing.started_at}; kept",
                         session_id=existing.session_id, started_at=existing.started_at)
        moment = now_s()
        # a server's attaches of one second share one `git status`; a hook start runs its own
        tree = tree_state(layout.root, reuse_seconds=STATUS_REUSE_SECONDS if held_by is not None else 0.0)
        at = rfc3339(moment)
        opened = store.OpenFile(
            session_id=new_episode_id(moment), started_at=at, provider=b.provider.name,
            provider_session=b.provider_session, owner=owner(), repository_id=repository_id(layout.root),
            worktree=str(layout.root), worktree_id=worktree_id(layout.root), branch=tree.branch,
            start_head=tree.head, start_working_tree=tree.working_tree, last_activity_at=at, held_by=held_by,
            attachments=1 if held_by is not None else 0, client=client,
            client_namespace=client_namespace if client is not None else None,
            extra=(("source", b.source),) if b.source else ())
        ensure_dir(layout.sessions_open)
        # first: an open episode never lacks its working context. Its name holds the id, and it is created only
        # where none is: two episodes opened in one second drew the same four hex digits in a soak (1 in 65,536 a
        # pair), and the second's end found the first's record and wrote none of its own
        for _ in range(1024):
            if _write_context(layout, opened, tree.head):
                break
            opened = replace(opened, session_id=new_episode_id(moment))
        else:
            raise InternalError(f"no free episode id in second {at}: 1,024 drawn, each held by a working context "
                                f"in {_rel(layout, layout.contexts_dir)}", "run the start again")
        sid = opened.session_id
        write_atomic(layout.open_file(key), opened.to_bytes())  # the episode is open from here on
        fsync_dir(layout.sessions_open)  # ... and its name survives a crash (docs/decisions.md: what the hooks fsync)
        line = f"session {sid} opened at {at} (head {tree.head[:7]})"
        try:
            write_atomic(layout.session_current, ("\n".join(yaml_lines(
                [("session_id", sid), ("provider_session", b.provider_session), ("key", key)])) + "\n").encode(),
                sync=False)  # a convenience pointer, rewritten by the next start: not worth an fsync
            ledger.append(layout, "session.started", session=sid, head=tree.head, branch=tree.branch, at=moment,
                          provider=b.provider.name, provider_session=b.provider_session, owner=opened.owner,
                          **({"source": b.source} if b.source else {}))
        except (OSError, MajordomusError) as exc:  # opened all the same: say so, never "could not open"
            detail = exc.message if isinstance(exc, MajordomusError) else (exc.strerror or type(exc).__name__)
            log_failure(layout, f"session {sid} opened, but its pointer or ledger line was not written: {detail}")
            line += f"; its ledger line was not written (see {_rel(layout, layout.context_log)})"
    return Drawn(line, opened=True, session_id=sid, started_at=at)


def finish_start(layout: Layout, provider_session: str) -> None:
    """`_finish_start` under the session's lock, for recovery: an episode whose server died may have died in its
    start, and no attach may ever come back to keep it."""
    key = session_key(provider_session)
    with file_lock(store.session_lock(layout, key)):
        opened = store.read_open_file(layout.open_file(key))
        if opened is not None:
            _finish_start(layout, opened)


def _finish_start(layout: Layout, opened: store.OpenFile) -> None:
    """The ledger line of an open episode whose start was killed after its open file (a server SIGKILLed
    mid-attach: its client's replayed attach keeps the episode, and it must not stay without `session.started`)."""
    sid = opened.session_id
    if not is_safe_id(sid) or ledger.has_event(layout, "session.started", sid):
        return
    try:
        ledger.append(layout, "session.started", session=sid, head=opened.start_head, branch=opened.branch,
                      at=parse_rfc3339(str(opened.started_at)) or now_utc(), provider=opened.provider,
                      provider_session=opened.provider_session, owner=opened.owner,
                      **{k: v for k, v in opened.extra if k == "source"})
    except (OSError, MajordomusError) as exc:  # kept all the same: the next start tries again
        log_failure(layout, f"session {sid} is open without its ledger line, which could not be written: "
                            f"{exc.message if isinstance(exc, MajordomusError) else exc.strerror}")


def _write_context(layout: Layout, opened: store.OpenFile, head: str) -> bool:
    """Create the episode's working context; False when one under its name (so its id) exists already."""
    opened_by = "connection" if opened.is_connection else "hook"
    meta = [("schema", "session-context/v1"), ("kind", "session-context"), ("session_id", opened.session_id),
            ("opened_at", opened.started_at), ("opened_by", opened_by), ("provider", opened.provider),
            ("provider_session", opened.provider_session), ("worktree_id", opened.worktree_id),
            ("branch", opened.branch), ("head", head)]
    body = ["---", *yaml_lines(meta), "---", f"# Working context of session {opened.session_id}", "",
            "## Context at open", "",
            f"Opened by {opened.provider} ({opened_by}) on branch {opened.branch} at "
            f"{head[:7]}, working tree {opened.start_working_tree}.", "", "## Notes", ""]
    ensure_dir(layout.contexts_dir)
    return create_exclusive(context_path(layout, opened.session_id, str(opened.started_at)),
                            ("\n".join(body) + "\n").encode())


def context_path(layout: Layout, session_id: str, started_at: str) -> Path:
    """`<opened compact>--<id>.md` inside the contexts directory, whatever an edited open file says: only
    digits, `T` and `Z` of the time and the id's own `[A-Za-z0-9-]` reach the name (never a separator or `..`)."""
    stamp = "".join(ch for ch in started_at[:32] if ch in "0123456789TZ")
    sid = "".join(ch for ch in session_id[:64] if ch.isascii() and (ch.isalnum() or ch == "-"))
    return layout.contexts_dir / f"{stamp}--{sid or 'episode'}.md"


def close_episode(layout: Layout, provider_session: str, reason: str | None, outcome: str, *,
                  turn_rule: bool = False, turn_wired: Callable[[], bool] | None = None,
                  evidence: str | None = None, client: str | None = None) -> str:
    """Write the record exactly once, then remove the open file: a kill in between leaves it closable.

    With `turn_rule` (a client's own end event), an `interrupted` outcome becomes `closed` when the episode's
    last turn completed: nothing was cut short. Recovery never passes it: an end that never came stays
    interrupted whatever the last turn. With `turn_wired` (asked only when needed: does the client run our
    end-of-turn hook?), a `closed` outcome becomes `interrupted` when the last turn is still running: Gemini
    and Copilot send their deliberate reason on SIGTERM too, and a turn that never finished was cut short.
    With `client` (a vanished client's close), the episode is closed only while its open file still names that
    client process: a start of the same session by a new process since then keeps it open. `evidence` says
    what showed the end, in the record, the ledger line and the working context."""
    key = session_key(provider_session)
    with file_lock(store.session_lock(layout, key)):
        path = layout.open_file(key)
        opened = store.read_open_file(path)
        if opened is None:
            return f"no open episode here for provider session {provider_session}; nothing to close"
        if client is not None and opened.client != client:
            return (f"episode {opened.session_id} is run by another client process now "
                    f"({opened.client or 'none named'}); kept")
        sid = opened.session_id
        if not is_safe_id(sid):  # an edited open file: its id would be a path in the record's name
            sid = new_episode_id(now_utc())
            log_failure(layout, f"the open file of provider session {provider_session} names no episode id "
                                f"({opened.session_id[:80]!r}); closed as {sid}")
            opened = replace(opened, session_id=sid)
        written = store.find_record(layout, sid)
        if written is not None:  # a close killed after its record: finish what it did not, then let go
            _finish_close(layout, opened, written)
            path.unlink(missing_ok=True)
            _release_pointer(layout, sid)
            sweep_stale_temps(layout.sessions_dir)  # killed between the record's link and its temp's unlink
            return f"episode {sid} already has a record at {_rel(layout, written)}; this close adds none"
        last_turn = opened.last_turn or "none"
        if turn_rule and outcome == "interrupted" and last_turn == "completed":
            outcome = "closed"
        elif outcome == "closed" and last_turn == "running" and turn_wired is not None and turn_wired():
            outcome = "interrupted"
        moment = now_s()
        deadline = time.monotonic() + END_GIT_SECONDS  # all git work of one close, inside a client's 1 s hook
        tree = tree_state(layout.root, with_status=False, deadline=deadline)  # one full status below serves both
        repo_id = repository_id(layout.root, deadline=deadline)
        changed, changed_state = _changed_files(layout.root, deadline)
        commits, commits_state = _commits(layout.root, opened.start_head or "NONE", tree.head, deadline)
        if changed_state in ("complete", "limit"):
            working = "dirty" if any(not c.startswith("??") for c in changed) else "clean"
        else:
            working = "unknown"
        # a list cut at its limit, or not obtained at all (git too slow or failed), is marked as such
        cut = tuple(name for name, state in (("changed_files", changed_state), ("commits", commits_state))
                    if state != "complete")
        record = store.SessionRecord(
            session_id=sid, provider=opened.provider, started_at=opened.started_at, closed_at=rfc3339(moment),
            outcome=outcome, end_reason=reason, repository_id=repo_id,
            worktree_id=worktree_id(layout.root), branch=tree.branch, start_head=opened.start_head, head=tree.head,
            start_working_tree=opened.start_working_tree, working_tree=working, changed_files=tuple(changed),
            commits=tuple(commits), compactions=opened.compactions, last_turn=last_turn,
            title=f"Session {sid} on {tree.branch}",
            truncated=cut, end_evidence=evidence)
        text = record.to_text()
        name = (f"{compact_stamp(moment)}--{sid}--{name_key(tree.branch)}--{tree.head[:7]}--"
                f"{os.urandom(8).hex()}.md")
        ensure_dir(layout.sessions_dir, 0o755)
        target = layout.sessions_dir / name
        # tracked and shared: readable like source; durable (bytes and name) before the open file goes
        create_exclusive(target, text.encode("utf-8"), 0o644, durable=True)
        rel = _rel(layout, target)
        _append_close(layout, opened, moment, outcome, reason, tree.head, rel, evidence)
        ledger.append(layout, "session.closed", session=sid, head=tree.head, branch=tree.branch, at=moment,
                      outcome=outcome, reason=reason, session_path=rel,
                      **({"evidence": evidence} if evidence else {}))
        path.unlink(missing_ok=True)  # only now: the record is safely on disk
        _release_pointer(layout, sid)
    sweep_stale_temps(layout.sessions_dir)  # a killed close's temp beside the records must never be committed
    because = f"reason {reason}" if reason else "no reason given"
    return f"episode closed ({outcome}, {because}) into {rel}"


def _finish_close(layout: Layout, opened: store.OpenFile, written: Path) -> None:
    """The ledger line and the context's close of a record a killed close left without them."""
    sid = opened.session_id
    if any(e.get("event") == "session.closed" and e.get("session") == sid for e in ledger.read(layout)):
        return
    try:
        record = store.SessionRecord.from_front_matter(front_matter(written.read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError):
        record = None
    if record is None:
        return
    moment = parse_rfc3339(str(record.closed_at)) or now_utc()
    rel = _rel(layout, written)
    head = record.head or "NONE"
    context = context_path(layout, sid, str(opened.started_at))
    if context.exists() and "\n## Close\n" not in context.read_text(encoding="utf-8", errors="replace"):
        _append_close(layout, opened, moment, str(record.outcome), record.end_reason, head, rel, record.end_evidence)
    evidence = {"evidence": record.end_evidence} if record.end_evidence else {}
    ledger.append(layout, "session.closed", session=sid, head=head, branch=record.branch, at=moment,
                  outcome=record.outcome, reason=record.end_reason, session_path=rel, **evidence)


def _append_close(layout: Layout, opened: store.OpenFile, moment: datetime | float, outcome: str, reason: str | None,
                  head: str, rel: str, evidence: str | None = None) -> None:
    path = context_path(layout, opened.session_id, str(opened.started_at))
    fields: list[tuple[str, Any]] = [("closed_at", rfc3339(moment)), ("outcome", outcome), ("reason", reason)]
    if evidence:
        fields.append(("evidence", evidence))
    close = ["", "## Close", *yaml_lines([*fields, ("head", head), ("record", rel)])]
    try:
        append_line(path, "\n".join(close))
    except OSError as exc:
        log_failure(layout, f"cannot append the close to the working context: {exc.strerror}")


def _release_pointer(layout: Layout, sid: str) -> None:
    if store.read_pointer(layout) == sid:
        layout.session_current.unlink(missing_ok=True)


def _git_lines(root: Path, deadline: float, *args: str) -> tuple[list[str], ListState]:
    """Up to LIST_LIMIT lines of a git listing, and how complete: `complete`, cut at the `limit`, stopped at
    its `timeout` (what came is kept) or `failed` (git refused: nothing)."""
    seconds = git_seconds(deadline, _list_seconds())
    if seconds <= 0:
        return [], "timeout"
    code, out = run_bounded(git_argv(root, *args), seconds)
    lines = [ln for ln in out.decode("utf-8", "replace").splitlines() if ln.strip()]
    if code is None:
        return lines[:LIST_LIMIT], "timeout"  # not obtained in time (or git would not start): marked, never []
    if code != 0:
        return [], "failed"
    return lines[:LIST_LIMIT], "limit" if len(lines) > LIST_LIMIT else "complete"


def _changed_files(root: Path, deadline: float) -> tuple[list[str], ListState]:
    # the layer's own files are not the agent's work; a file's name can hold a token
    lines, state = _git_lines(root, deadline, *CHANGED_FILES)
    return [scrub(line) or line for line in lines], state


def _commits(root: Path, start: str, head: str, deadline: float) -> tuple[list[str], ListState]:
    if head == "NONE" or start == head:
        return [], "complete"
    spec = [head] if start == "NONE" else [f"{start}..{head}"]
    lines, state = _git_lines(root, deadline, "rev-list", "--abbrev-commit", f"--max-count={LIST_LIMIT + 1}", *spec)
    if state == "failed":  # the start is not an ancestor any more (or is gone)
        return ["diverged"], "complete"
    return lines, state


def count_compaction(layout: Layout, b: Boundary) -> str:
    assert b.provider_session is not None
    key = session_key(b.provider_session)
    with file_lock(store.session_lock(layout, key)):
        opened = store.read_open_file(layout.open_file(key))
        if opened is None:
            return f"no open episode here for provider session {b.provider_session}; compaction not counted"
        opened = replace(opened, compactions=opened.compactions + 1, last_activity_at=rfc3339(now_s()))
        write_atomic(layout.open_file(key), opened.to_bytes())
        branch, head = head_state(layout.root)
        ledger.append(layout, "session.compacted", session=opened.session_id, head=head, branch=branch,
                      provider=b.provider.name, compactions=opened.compactions)
    return f"session {opened.session_id} compacted (compaction {opened.compactions})"


def end_turn(layout: Layout, b: Boundary, *, completed: bool = True, status: str | None = None) -> str:
    """The client's end-of-turn hook: the agent finished answering, so the episode's last turn completed.

    A turn the client says ended otherwise (Cursor's stop `status: aborted`) leaves the turn `running`."""
    assert b.provider_session is not None
    key = session_key(b.provider_session)
    with file_lock(store.session_lock(layout, key)):
        opened = store.read_open_file(layout.open_file(key))
        if opened is None:
            return f"no open episode here for provider session {b.provider_session}; turn not recorded"
        state = "completed" if completed else "running"
        # no fsync: after a machine crash the client is gone too, and recovery closes the episode interrupted
        # whatever its last turn (docs/decisions.md: what the hooks fsync)
        write_atomic(layout.open_file(key),
                     replace(opened, last_turn=state, last_activity_at=rfc3339(now_s())).to_bytes(), sync=False)
    if completed:
        return f"session {opened.session_id} turn completed"
    return f"session {opened.session_id} turn ended {status}; not completed"


def set_connection_state(root: Path, external_id: str, *, held_by: int | None, detached_at: str | None,
                         attachments: int | None = None, bridge: int | None = None, sync: bool = True) -> bool:
    """The board's note in the open file: which server holds the episode (and through which bridge, whose life
    keeps it held when that server is killed), since when it is detached, and how many attachments it has had
    across servers."""
    layout = Layout(root)
    if not layout.is_initialised():
        return False  # no layer, no open files: never create one as a side effect
    changes: dict[str, Any] = {"held_by": held_by, "detached_at": detached_at, "bridge": bridge}
    if attachments is not None:
        changes["attachments"] = attachments
    return store.update_open(layout, external_id, sync=sync, **changes)
