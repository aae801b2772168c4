"""`capture scrub`: redact the records a writer older than today's redaction left with a credential in them.

What it reads: the tracked session records (`.ai/repo/sessions/*.md`, which teams push), the working contexts,
the ledger and its archives, and every prompt record with both renderings. Each file is redacted with the very
rules the hook applies (majordomus.redact), every other byte kept, and rewritten atomically with its own mode; a
file name that holds a credential is renamed to its redacted form. A prompt record is redacted member by member
and its renderings written again from it, so the record still parses. Nothing is committed and git history is
never rewritten: a record that was pushed keeps its credential in the remote's history, which the sentence says.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from majordomus.archive import record as rec
from majordomus.archive.render import write_renderings
from majordomus.layout import Layout, refuse_symlink, write_atomic
from majordomus.redact import redact, scrub

HISTORY = ("majordomus never rewrites git history: a record that was already pushed keeps the credential in the "
           "remote's history — rotate the credential, then rewrite history yourself if you must (for example "
           "`git filter-repo --replace-text`)")
FILE_LIMIT = 16 * 1024 * 1024  # a record larger than this is not ours to have written: reported, not read


@dataclass(frozen=True)
class Change:
    rel: str  # the file as it was named, redacted
    rules: tuple[str, ...]  # the rules that fired
    renamed_to: str | None = None


def _text_files(layout: Layout) -> Iterator[Path]:
    """The files whose bytes are text majordomus wrote: session records, working contexts, the ledger(s)."""
    for directory, suffixes in ((layout.sessions_dir, (".md",)), (layout.contexts_dir, (".md", ".log")),
                                (layout.state, (".jsonl",))):
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            continue
        for name in names:
            if name.endswith(suffixes) and not name.startswith(".") and name != "README.md":
                yield directory / name


def _rel(layout: Layout, path: Path) -> str:
    """A file's name as said on a stream: redacted too (the name itself may be what holds the credential)."""
    rel = str(path.relative_to(layout.root))
    return scrub(rel) or rel


def _scrub_text_file(layout: Layout, path: Path, dry_run: bool) -> Change | None:
    info = path.lstat()
    if not stat.S_ISREG(info.st_mode) or info.st_size > FILE_LIMIT:
        return None  # a link or a special file is never followed; an oversized one is not ours
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    new_text, fired = redact(text)
    new_name = scrub(path.name) or path.name
    if not fired and new_name == path.name:
        return None
    target = path.with_name(new_name) if new_name != path.name and not path.with_name(new_name).exists() else path
    if not dry_run:
        write_atomic(target, new_text.encode("utf-8"), mode=stat.S_IMODE(info.st_mode))
        if target != path:
            path.unlink()
    names = set(fired) | ({"file name"} if target != path else set())
    return Change(_rel(layout, path), tuple(sorted(names)), _rel(layout, target) if target != path else None)


def _scrub_prompt(layout: Layout, path: Path, dry_run: bool) -> Change | None:
    try:
        record = rec.load(path)
    except rec.RecordError:
        return None
    members = record.members()
    fired: set[str] = set()
    for key, member in list(members.items()):
        if isinstance(member, str):
            cleaned, rules = redact(member)
            if rules:
                members[key] = cleaned
                fired.update(rules)
    new_name = scrub(path.name) or path.name
    if not fired and new_name == path.name:
        return None
    target = path.with_name(new_name) if new_name != path.name and not path.with_name(new_name).exists() else path
    if not dry_run:
        if fired:  # the record says which rules fired in it, as a capture would have
            before = set(record.redacted.split(",")) if record.redacted else set()
            members["redacted"] = ",".join(sorted(before | fired))
        cleaned_record = rec.PromptRecord.from_members(members)
        write_atomic(target, rec.dumps(cleaned_record), mode=0o600)
        write_renderings(layout.prompts_dir, target.name[: -len(".json")], cleaned_record)
        if target != path:
            stem = path.name[: -len(".json")]
            for suffix in (".json", ".md", ".yaml"):
                (layout.prompts_dir / f"{stem}{suffix}").unlink(missing_ok=True)
    names = fired | ({"file name"} if target != path else set())
    return Change(_rel(layout, path), tuple(sorted(names)), _rel(layout, target) if target != path else None)


def scrub_layer(layout: Layout, *, dry_run: bool = False) -> list[Change]:
    """Every file this redaction would change, changed (or, with dry_run, only named)."""
    for directory in (layout.sessions_dir, layout.contexts_dir, layout.state, layout.prompts_dir):
        if directory.exists():
            refuse_symlink(directory)
    changes: list[Change] = []
    for path in _text_files(layout):
        found = _scrub_text_file(layout, path, dry_run)
        if found is not None:
            changes.append(found)
    try:
        names = sorted(n for n in os.listdir(layout.prompts_dir) if rec.is_record_name(n))
    except OSError:
        names = []
    for name in names:
        path = layout.prompts_dir / name
        if path.is_symlink():
            continue
        found = _scrub_prompt(layout, path, dry_run)
        if found is not None:
            changes.append(found)
    return changes


def tracked_with_credentials(layout: Layout, limit: int = 20) -> list[Change]:
    """The tracked session records that still hold a credential (doctor's finding): read-only, at most `limit`."""
    found: list[Change] = []
    try:
        names = sorted(n for n in os.listdir(layout.sessions_dir) if n.endswith(".md") and n != "README.md")
    except OSError:
        return found
    for name in names:
        path = layout.sessions_dir / name
        change = _scrub_text_file(layout, path, dry_run=True) if not path.is_symlink() else None
        if change is not None:
            found.append(change)
            if len(found) >= limit:
                break
    return found
