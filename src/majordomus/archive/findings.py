"""Doctor's findings on the prompt archive (SPEC 5.7; REFERENCE 7.2, 7.3), as values.

Categories `prompts` (privacy, provenance, retention) and `capture` (record shape, renderings, the log).
Counts are reported as they are: an unlinked record is never rounded away.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from datetime import timedelta
from hashlib import sha256 as fast_sha256  # OpenSSL's: not the hook's builtin, 3-4x faster a record
from stat import S_ISLNK, S_ISREG
from typing import TYPE_CHECKING

from majordomus.archive import record as rec
from majordomus.archive.prune import age_key, bounds
from majordomus.archive.render import disagreeing, fingerprint
from majordomus.archive.scan import Named, entries, halves
from majordomus.errors import ContractError
from majordomus.findings import Finding
from majordomus.identity import now_utc
from majordomus.layout import PRIVATE_DIR, Layout

if TYPE_CHECKING:
    from majordomus.archive.prune import Bounds

RENDER = "majordomus capture render"
RECONCILE = "majordomus capture reconcile"
PRUNE = "majordomus capture prune"
FORBIDDEN = ("response", "completion", "transcript", "messages", "reply", "assistant")
_LEAKY_KNOWN = any(w in k for k in rec.KNOWN for w in FORBIDDEN)  # False today: then no record need be asked


def findings(layout: Layout) -> list[Finding]:
    rel = str(layout.prompts_dir.relative_to(layout.root))
    if layout.prompts_dir.is_symlink():
        return [Finding("FAIL", "prompts", rel, "the archive directory is a symbolic link; majordomus refuses to "
                        "follow it, so nothing is captured", "replace it with a real directory: majordomus update")]
    if not layout.prompts_dir.is_dir():
        return [Finding("INFO", "prompts", rel, "no archive here; nothing has been captured into this checkout")]
    marks = _marks(layout)
    tally = _tally(layout, marks)  # before privacy: the records' modes come from the fds their reads opened
    out = _privacy(layout, rel, marks)
    if not tally.count:
        out.append(Finding("OK", "prompts", rel, "no records yet; the archive is empty"))
    else:
        out += _provenance(tally, rel)
    out += _retention(tally)
    out += _shape(layout, tally, rel)
    return out


@dataclass
class Tally:
    """What doctor says about the archive, gathered in one pass over the records, one parsed at a time."""

    count: int = 0
    linked: int = 0
    unlinked: int = 0
    missing: int = 0
    unknown: int = 0
    body_total: int = 0
    old: int = 0
    limits: Bounds | None = None
    limits_problem: str | None = None
    refused: Named = field(default_factory=Named)
    ugly: Named = field(default_factory=Named)
    leaky: Named = field(default_factory=Named)
    unrendered: Named = field(default_factory=Named)
    stale: Named = field(default_factory=Named)
    strays: int = 0  # renderings without a record beside them

    def merge(self, part: Tally) -> None:
        """Another part's tally added to this one (`scan.halves`: the parts in order)."""
        for name in ("count", "linked", "unlinked", "missing", "unknown", "body_total", "old"):
            setattr(self, name, getattr(self, name) + getattr(part, name))
        for named in ("refused", "ugly", "leaky", "unrendered", "stale"):
            getattr(self, named).merge(getattr(part, named))


@dataclass
class Marks:
    """One listing of the directory: the records' and renderings' names, and what privacy counts of the rest."""

    wide: int = 0
    links: int = 0
    renderings: set[str] = field(default_factory=set)  # every rendering's name (not hidden): stat'ed beside its record
    records: list[str] = field(default_factory=list)  # the records' names, as `scan.record_names` picks them


def _marks(layout: Layout) -> Marks:
    """The listing alone: names (a listdir, no entry objects: 280k names at 100k records), sorted records,
    and the modes of what is neither record nor rendering. A record's mode comes with its read, a rendering's with
    its record's (`_part`), a stray rendering's only when the parts found fewer matches than renderings (`_strays`)."""
    m = Marks()
    renderings, records = m.renderings, m.records
    rendering = (".md", ".yaml")
    is_record = rec.is_record_name
    dir_fd = os.open(layout.prompts_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        for name in os.listdir(dir_fd):
            if name.endswith(rendering) and not name.startswith("."):
                renderings.add(name)
            elif is_record(name):
                records.append(name)
            else:
                _count(m, _mode(name, dir_fd))
        records.sort()
    finally:
        os.close(dir_fd)
    return m


def _strays(layout: Layout, marks: Marks) -> None:
    """The privacy counts of the renderings no record's read stat'ed (a stray has no record beside it)."""
    stems = {name[:-5] for name in marks.records}
    dir_fd = os.open(layout.prompts_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        for name in marks.renderings:
            if name.rsplit(".", 1)[0] not in stems:
                _count(marks, _mode(name, dir_fd))
    finally:
        os.close(dir_fd)


def _mode(name: str, dir_fd: int) -> int:
    """The st_mode of a name in the directory, links not followed; 0 when it went since the listing."""
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    except OSError:
        return 0


def _count(m: Marks | Part, mode: int) -> None:
    if S_ISLNK(mode):
        m.links += 1
    elif S_ISREG(mode) and mode & 0o077:
        m.wide += 1


@dataclass
class Part:
    """What one part of the records says (`scan.halves`): its tally, and the privacy counts of its files."""

    tally: Tally
    wide: int = 0
    links: int = 0
    matched: int = 0  # renderings with their record beside them


def _tally(layout: Layout, marks: Marks) -> Tally:
    t = Tally()
    cutoff = None
    try:
        t.limits = bounds(layout)
        cutoff = (now_utc() - timedelta(days=t.limits.max_days)).strftime("%Y%m%d%H%M%S")
    except ContractError as exc:
        t.limits_problem = exc.message
    matched = 0
    for part in halves(marks.records, lambda names: _part(layout, names, marks.renderings, cutoff)):
        t.merge(part.tally)
        marks.wide += part.wide
        marks.links += part.links
        matched += part.matched
    t.strays = len(marks.renderings) - matched
    if t.strays:
        _strays(layout, marks)
    return t


def _part(layout: Layout, names: list[str], shown: set[str], cutoff: str | None) -> Part:
    """The tally of these records, each read once, its renderings stat'ed by name beside it."""
    part = Part(Tally())
    t = part.tally
    dir_fd = os.open(layout.prompts_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        for e in entries(layout, names, modes=True):
            t.count += 1
            _count(part, e.mode)  # the mode of the file its read opened; a link, refused, by name (scan.entries)
            r = e.record
            stem = e.name[:-5]  # less ".json"
            md, yml = _stamp(stem + ".md", shown, dir_fd, part), _stamp(stem + ".yaml", shown, dir_fd, part)
            has_md, has_yml = md is not None, yml is not None
            part.matched += has_md + has_yml
            if r is None:
                t.refused.add(e.name, e.problem)
                continue
            link = r.episode_link
            if link is None and "episode_link" not in r.present:
                t.missing += 1
            elif link not in rec.LINKS or (link in rec.LINKED) != isinstance(r.episode, str):
                t.unknown += 1  # a word outside the five, or a link word whose episode says otherwise
            elif link in rec.LINKED:
                t.linked += 1
            else:
                t.unlinked += 1
            if r.text is not None:
                t.body_total += r.body_bytes
                t.old += cutoff is not None and age_key(e) < cutoff
            if not e.pretty:
                t.ugly.add(e.name)
            if _LEAKY_KNOWN and any(w in k for k in r.members() for w in FORBIDDEN):
                t.leaky.add(e.name)  # (a parsed record has only KNOWN members; one with another is refused above)
            if not (has_md and has_yml):
                t.unrendered.add(e.name)
            else:
                mark = fingerprint(e.raw, fast_sha256)  # both carry it: written whole from these very bytes (render.py)
                if not (md == mark and yml == mark) and disagreeing(layout.prompts_dir, stem, r):
                    t.stale.add(e.name)
    finally:
        os.close(dir_fd)
    return part


def _stamp(name: str, shown: set[str], dir_fd: int, part: Part) -> int | None:
    """A rendering's fingerprint (its mtime's nanoseconds) when it is a plain file, -1 when it is listed but is not
    one (or went since), None when the listing has no such name; its mode counted for privacy."""
    if name not in shown:
        return None
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return -1
    mode = st.st_mode
    _count(part, mode)
    return st.st_mtime_ns % 1_000_000_000 if S_ISREG(mode) else -1


def _privacy(layout: Layout, rel: str, marks: Marks) -> list[Finding]:
    out: list[Finding] = []
    mode = stat.S_IMODE(os.lstat(layout.prompts_dir).st_mode)
    if mode != PRIVATE_DIR:
        out.append(Finding("FAIL", "prompts", rel, f"the archive directory is mode {mode:o}; the file names are the "
                           "openings of the prompts", RENDER))
    wide, links = marks.wide, marks.links
    if wide:
        out.append(Finding("FAIL", "prompts", rel, f"{wide} file(s) in the prompt archive are readable beyond their "
                           "owner; raw prompts are the most private thing this tool writes", RENDER))
    if links:
        out.append(Finding("FAIL", "prompts", rel, f"{links} symbolic link(s) in the archive; they are refused, never "
                           "followed: replace each with a real file or remove it"))
    if not out:
        out.append(Finding("OK", "prompts", rel, "the archive and every record in it are readable by their owner only"))
    return out


def _provenance(t: Tally, rel: str) -> list[Finding]:
    linked, unlinked, missing, unknown = t.linked, t.unlinked, t.missing, t.unknown
    out: list[Finding] = []
    if unknown:
        out.append(Finding("FAIL", "prompts", rel, f"{unknown} record(s) name a provenance that is not one of: "
                           f"{' '.join(rec.LINKS)}", RECONCILE))
    if missing:
        out.append(Finding("FAIL", "prompts", rel, f"{missing} record(s) say nothing about which episode they belong "
                           "to; reconcile links them on evidence or marks them unlinked-legacy", RECONCILE))
    if not out:
        out.append(Finding("OK", "prompts", rel, f"{linked + unlinked} record(s) each name their episode or say why "
                           f"they cannot: {linked} linked, {unlinked} unlinked with their provenance recorded"))
    return out


def _retention(t: Tally) -> list[Finding]:
    if t.limits is None:
        return [Finding("FAIL", "prompts", "retention", f"{t.limits_problem}; the retention bounds cannot be checked")]
    limits, total, old = t.limits, t.body_total, t.old
    out: list[Finding] = []
    if old:
        out.append(Finding("FAIL", "prompts", "retention", f"{old} prompt body(ies) are older than the "
                           f"{limits.max_days} day(s) the policy allows", PRUNE))
    if total > limits.max_bytes:
        out.append(Finding("FAIL", "prompts", "retention", f"{total} byte(s) of prompt bodies, over the cap of "
                           f"{limits.max_bytes}", PRUNE))
    if not out:
        out.append(Finding("OK", "prompts", "retention", f"{total} byte(s) of bodies under the cap of "
                           f"{limits.max_bytes}, none older than {limits.max_days} day(s)"))
    return out


def _shape(layout: Layout, t: Tally, rel: str) -> list[Finding]:
    out: list[Finding] = []
    if t.refused.count:
        out.append(Finding("FAIL", "capture", rel, f"{t.refused.count} file(s) under a record's name are not records "
                           f"this writer can account for: {t.refused.names()} (the first {t.refused.problem})"))
    if t.ugly.count:
        out.append(Finding("FAIL", "capture", rel, f"{t.ugly.count} record(s) are not in the pretty "
                           "one-member-per-line shape of majordomus.capture/v1", RENDER))
    if t.leaky.count:
        out.append(Finding("FAIL", "capture", rel, f"{t.leaky.count} record(s) carry a member that looks like a model "
                           "response or transcript; the archive keeps what the person typed, nothing else"))
    if t.unrendered.count:
        out.append(Finding("FAIL", "capture", rel, f"{t.unrendered.count} record(s) lack a rendering (.md or .yaml): "
                           f"{t.unrendered.names()}", RENDER))
    if t.stale.count:
        out.append(Finding("FAIL", "capture", rel, f"{t.stale.count} record(s) have a rendering that says something "
                           f"else than the record (a rewrite was cut short; it may still show a pruned body): "
                           f"{t.stale.names()}", RENDER))
    strays = t.strays
    if strays:
        out.append(Finding("WARN", "capture", rel, f"{strays} rendering(s) have no record beside them; a "
                           "rendering is never turned back into a record, so they are reported, not repaired"))
    try:
        text = layout.capture_log.read_text(encoding="utf-8", errors="replace")
        lines = [ln for ln in text.splitlines() if ln.strip()]
    except FileNotFoundError:
        lines = []
    if lines:
        out.append(Finding("FAIL", "capture", f"{rel}/.capture.log",
                           f"{len(lines)} capture(s) failed and their prompts "
                           f"were not archived; the most recent: {lines[-1]}  (read the log, then empty it)"))
    if not out:
        out.append(Finding("OK", "capture", rel, f"{t.count} record(s) in the majordomus.capture/v1 shape, each "
                           "with both renderings; no failed capture logged"))
    return out
