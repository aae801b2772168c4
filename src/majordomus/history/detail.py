"""One episode whole — its prompts, the commits of its window, the diff stat, how to resume it — and the
episodes a commit was made in, on evidence only.

Git is asked with `--no-optional-locks` (never a lock left behind) and bounded in time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from majordomus import ledger
from majordomus.archive import record as rec
from majordomus.archive.render import tombstone
from majordomus.clients.providers import Provider, get_provider
from majordomus.episodes import store
from majordomus.errors import MajordomusError
from majordomus.history.timeline import Episode
from majordomus.identity import git_argv, head_state, now_utc, parse_rfc3339, rfc3339, run_bounded, worktree_id
from majordomus.layout import Layout
from majordomus.usage.episode import known, policy_overrides, usage_json, usage_of

if TYPE_CHECKING:
    from typing import Any

GIT_SECONDS = 10.0
COMMIT_LIMIT = 500
_HEX = re.compile(r"[0-9a-fA-F]{4,64}")


def _git(root: Path, *args: str) -> tuple[int | None, str]:
    code, out = run_bounded(git_argv(root, *args), GIT_SECONDS)
    return code, out.decode("utf-8", "replace")


def _is_sha(head: str | None) -> bool:
    return bool(head) and head != "NONE" and _HEX.fullmatch(str(head)) is not None


def current_head(layout: Layout, e: Episode) -> str | None:
    """An episode's head: the record's, or for one still open in this worktree the worktree's HEAD now."""
    if e.head is not None:
        return e.head
    if e.is_open and e.worktree_id == worktree_id(layout.root):
        head = head_state(layout.root)[1]
        return None if head == "NONE" else head
    return None


# -- prompts ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Prompt:
    name: str
    record: rec.PromptRecord | None
    problem: str | None

    def to_json(self) -> dict[str, Any]:
        r = self.record
        if r is None:
            return {"record": self.name, "problem": self.problem}
        return {"record": self.name, "started_at": r.started_at, "provider": r.provider,
                "episode_link": r.episode_link, "session": r.session, "redacted": r.redacted,
                "pruned": r.pruned_at is not None, "text": r.text, "tombstone": tombstone(r)}


def load_prompts(layout: Layout, names: list[str]) -> list[Prompt]:
    out = []
    for name in names:
        try:
            out.append(Prompt(name, rec.load(layout.prompts_dir / name), None))
        except rec.RecordError as exc:
            out.append(Prompt(name, None, str(exc)))
    return out


# -- commits and the diff stat ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Commits:
    items: tuple[tuple[str, str], ...]  # (short sha, subject)
    source: str  # "git log <start>..<head>", or "the record" when this clone lacks the heads
    note: str | None = None


def window_commits(layout: Layout, e: Episode) -> Commits:
    start, head = e.start_head, current_head(layout, e)
    if _is_sha(head) and (start == head):
        return Commits((), f"git log {str(start)[:7]}..{str(head)[:7]}")
    if _is_sha(head):
        spec = [str(head)] if not _is_sha(start) else [f"{start}..{head}"]
        code, out = _git(layout.root, "log", f"--max-count={COMMIT_LIMIT + 1}", "--format=%h%x00%s", *spec, "--")
        if code == 0:
            items = tuple(tuple(line.split("\x00", 1)) for line in out.splitlines() if "\x00" in line)
            note = f"only the newest {COMMIT_LIMIT} are shown" if len(items) > COMMIT_LIMIT else None
            label = f"{str(start)[:7]}..{str(head)[:7]}" if _is_sha(start) else str(head)[:7]
            return Commits(items[:COMMIT_LIMIT], f"git log {label}", note)  # type: ignore[arg-type]
    listed = tuple((c, "") for c in e.commits if c != "diverged")
    note = "the heads are not in this clone; these are the commits the record lists"
    if "diverged" in e.commits:
        note = "the record says the branch diverged from its start head"
    return Commits(listed, "the record", note if e.path is not None and not e.is_open else None)


def diff_stat(layout: Layout, e: Episode) -> tuple[str | None, str]:
    """(the `git diff --stat` text, or None, and the range or the reason there is none)."""
    start, head = e.start_head, current_head(layout, e)
    if not (_is_sha(start) and _is_sha(head)):
        return None, "no start head and head to compare"
    label = f"{str(start)[:7]}..{str(head)[:7]}"
    if start == head:
        return "", label
    code, out = _git(layout.root, "diff", "--stat", "--no-color", str(start), str(head), "--")
    if code != 0:
        return None, f"{label} is not in this clone"
    return out.rstrip("\n"), label


# -- one episode whole -----------------------------------------------------------------------------------------
def whole(layout: Layout, e: Episode, prompt_names: list[str]) -> dict[str, Any]:
    """One episode whole, in the shape of `show --json` (docs/show-command.md) without its `schema`."""
    prompts = load_prompts(layout, prompt_names)
    commits = window_commits(layout, e)
    stat, stat_range = diff_stat(layout, e)
    resume = resume_of(layout, e)
    data = e.to_json(len(prompts), layout.root)
    data.update(start_head=e.start_head, head=current_head(layout, e), compactions=e.compactions,
                changed_files=list(e.changed_files), truncated=list(e.truncated), detached_at=e.detached_at,
                last_activity_at=e.last_activity_at, older_schema=e.schema_note)
    return {"episode": data, "usage": usage_json(usage_of(layout, e, known(layout).get(e.id)),
                                                 policy_overrides(layout)),
            "prompts": [pr.to_json() for pr in prompts],
            "commits": {"source": commits.source, "note": commits.note,
                        "items": [{"commit": c, "subject": s} for c, s in commits.items]},
            "diff_stat": {"range": stat_range, "text": stat},
            "resume": None if resume is None else {"command": resume.command, "session": resume.session,
                                                   "session_from": resume.session_from,
                                                   "evidence": resume.evidence, "sentence": resume.sentence}}


# -- resuming ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Resume:
    command: str | None
    session: str | None
    session_from: str | None  # where the client's session id was found
    evidence: str | None
    sentence: str  # what `show` prints


def client_session(layout: Layout, e: Episode) -> tuple[str | None, str | None]:
    """The client's own session id of an episode, and where it was found: the open file, the working
    context, or the ledger's `session.started` line. Closed records do not carry it, and these files are
    private to the checkout where the episode ran."""
    if e.provider_session:
        return e.provider_session, str(e.path.relative_to(layout.root)) if e.path else "its open file"
    for ctx in store.working_contexts(layout):
        if ctx.session_id == e.id and ctx.provider_session:
            return ctx.provider_session, str(layout.contexts_dir.relative_to(layout.root))
    for line in ledger.read(layout):
        if line.get("event") == "session.started" and line.get("session") == e.id:
            found = line.get("provider_session")
            if isinstance(found, str) and found:
                return found, str(layout.ledger_file.relative_to(layout.root))
    return None, None


def resume_of(layout: Layout, e: Episode) -> Resume | None:
    """How to resume an interrupted episode in its own client; None for any other state."""
    if e.state != "interrupted":
        return None
    provider: Provider | None
    try:
        provider = get_provider(e.provider) if e.provider else None
    except MajordomusError:
        provider = None
    if provider is None or provider.resume is None:
        name = e.provider or "an unknown client"
        return Resume(None, None, None, None, f"{name} declares no command that resumes a session "
                                              "(providers.yaml has no resume row for it)")
    session, where = client_session(layout, e)
    if session is None:
        return Resume(None, None, None, provider.resume.evidence,
                      f"{provider.resume.command.replace('{session}', '<session>')} — the client's session id of "
                      "this episode is not known in this checkout (it is kept in the working context of the "
                      "checkout where the episode ran)")
    line = provider.resume.line(session)
    return Resume(line, session, where, provider.resume.evidence,
                  f"{line}   (the client's session from {where}; the command from providers.yaml)")


# -- a commit's episodes ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CommitInfo:
    sha: str
    subject: str
    committed_at: str


def resolve_commit(layout: Layout, arg: str) -> CommitInfo | None:
    code, out = _git(layout.root, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{arg}^{{commit}}")
    sha = out.strip()
    if code != 0 or not re.fullmatch(r"[0-9a-f]{40,64}", sha):
        return None
    code, out = _git(layout.root, "log", "-1", "--format=%ct%x00%s", sha, "--")
    if code != 0 or "\x00" not in out:
        return None
    stamp, subject = out.rstrip("\n").split("\x00", 1)
    from datetime import datetime, timezone

    return CommitInfo(sha, subject, rfc3339(datetime.fromtimestamp(int(stamp), timezone.utc)))


def _is_ancestor(root: Path, commit: str, of: str) -> bool | None:
    code, _ = _git(root, "merge-base", "--is-ancestor", commit, of)
    return True if code == 0 else False if code == 1 else None


TRAILER = "Majordomus-Episode"


def trailer_episodes(layout: Layout, sha: str) -> list[str]:
    """The episode ids a commit's `Majordomus-Episode` trailers name (`capture install --git`), in order."""
    code, out = _git(layout.root, "log", "-1", f"--format=%(trailers:key={TRAILER},valueonly,separator=%x00)",
                     sha, "--")
    if code != 0:
        return []
    return [v.strip() for v in out.strip().split("\x00") if v.strip().startswith("s-")]


@dataclass(frozen=True)
class Candidate:
    episode: Episode
    evidence: str


def episodes_of_commit(layout: Layout, episodes: list[Episode], commit: CommitInfo) -> list[Candidate]:
    """The episodes whose window contains the commit: committed between its start and its close (or now, for
    one open in this worktree), reachable from its head and not from its start head. Never by nearness: an
    episode whose heads this clone cannot check is a candidate only when its record lists the commit."""
    named = trailer_episodes(layout, commit.sha)
    by_id = {e.id: e for e in episodes}
    known = [by_id[n] for n in named if n in by_id]
    if known:
        return [Candidate(e, f"named by its {TRAILER} trailer: {e.id} (written by the prepare-commit-msg hook "
                             "while that episode was the one open in its worktree and its turn was running)")
                for e in known]
    at = commit.committed_at
    now = rfc3339(now_utc())
    out: list[Candidate] = []
    for e in episodes:
        if not e.started_at or parse_rfc3339(e.started_at) is None:
            continue
        end = e.closed_at if not e.is_open else now
        if end is None or not (e.started_at <= at <= end):
            continue
        head = current_head(layout, e)
        where = f"worktree {e.worktree_id}" if e.worktree_id else "an unnamed worktree"
        closing = f"its close {e.closed_at}" if not e.is_open else f"now (it is {e.state})"
        window = f"committed {at}, between its start {e.started_at} and {closing}"
        reach = _is_ancestor(layout.root, commit.sha, str(head)) if _is_sha(head) else None
        if reach is True:
            before = _is_ancestor(layout.root, commit.sha, str(e.start_head)) if _is_sha(e.start_head) else False
            if before is False:
                start = f"not from its start head {str(e.start_head)[:7]}" if _is_sha(e.start_head) else \
                    "and it began before the first commit"
                out.append(Candidate(e, f"inside the window of {e.id}: {window}; reachable from its head "
                                        f"{str(head)[:7]} and {start}; in {where}"))
            continue
        if reach is None and any(commit.sha.startswith(c) for c in e.commits if _HEX.fullmatch(c)):
            out.append(Candidate(e, f"inside the window of {e.id}: {window}; its record lists the commit among "
                                    f"its commits (its heads are not in this clone); in {where}"))
    return out
