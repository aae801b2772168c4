"""Doctor's findings on the prompt archive (SPEC 5.7; REFERENCE 7.2, 7.3), as values.

Categories `prompts` (privacy, provenance, retention) and `capture` (record shape, renderings, the log).
Counts are reported as they are: an unlinked record is never rounded away.
"""

from __future__ import annotations

import os
import stat
from datetime import timedelta

from majordomus.archive import record as rec
from majordomus.archive.render import disagreeing
from majordomus.archive.scan import Entry, scan
from majordomus.errors import ContractError
from majordomus.findings import Finding
from majordomus.identity import now_utc
from majordomus.layout import PRIVATE_DIR, Layout

RENDER = "majordomus capture render"
RECONCILE = "majordomus capture reconcile"
PRUNE = "majordomus capture prune"
FORBIDDEN = ("response", "completion", "transcript", "messages", "reply", "assistant")


def findings(layout: Layout) -> list[Finding]:
    rel = str(layout.prompts_dir.relative_to(layout.root))
    if layout.prompts_dir.is_symlink():
        return [Finding("FAIL", "prompts", rel, "the archive directory is a symbolic link; majordomus refuses to "
                        "follow it, so nothing is captured", "replace it with a real directory: majordomus update")]
    if not layout.prompts_dir.is_dir():
        return [Finding("INFO", "prompts", rel, "no archive here; nothing has been captured into this checkout")]
    out = _privacy(layout, rel)
    entries = scan(layout)
    if not entries:
        out.append(Finding("OK", "prompts", rel, "no records yet; the archive is empty"))
    else:
        out += _provenance(entries, rel)
    out += _retention(layout, entries)
    out += _shape(layout, entries, rel)
    return out


def _privacy(layout: Layout, rel: str) -> list[Finding]:
    out: list[Finding] = []
    mode = stat.S_IMODE(os.lstat(layout.prompts_dir).st_mode)
    if mode != PRIVATE_DIR:
        out.append(Finding("FAIL", "prompts", rel, f"the archive directory is mode {mode:o}; the file names are the "
                           "openings of the prompts", RENDER))
    wide = links = 0
    with os.scandir(layout.prompts_dir) as it:
        for entry in it:
            if entry.is_symlink():
                links += 1
            elif (entry.is_file(follow_symlinks=False)
                  and stat.S_IMODE(entry.stat(follow_symlinks=False).st_mode) & 0o077):
                wide += 1
    if wide:
        out.append(Finding("FAIL", "prompts", rel, f"{wide} file(s) in the prompt archive are readable beyond their "
                           "owner; raw prompts are the most private thing this tool writes", RENDER))
    if links:
        out.append(Finding("FAIL", "prompts", rel, f"{links} symbolic link(s) in the archive; they are refused, never "
                           "followed: replace each with a real file or remove it"))
    if not out:
        out.append(Finding("OK", "prompts", rel, "the archive and every record in it are readable by their owner only"))
    return out


def _provenance(entries: list[Entry], rel: str) -> list[Finding]:
    linked = unlinked = missing = unknown = 0
    for entry in entries:
        r = entry.record
        if r is None:
            continue  # reported under `capture`
        link = r.episode_link
        if link is None and "episode_link" not in r.present:
            missing += 1
        elif link not in rec.LINKS or (link in rec.LINKED) != isinstance(r.episode, str):
            unknown += 1  # a word outside the five, or a link word whose episode says otherwise
        elif link in rec.LINKED:
            linked += 1
        else:
            unlinked += 1
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


def _retention(layout: Layout, entries: list[Entry]) -> list[Finding]:
    from majordomus.archive.prune import age_key, bounds

    try:
        limits = bounds(layout)
    except ContractError as exc:
        return [Finding("FAIL", "prompts", "retention", f"{exc.message}; the retention bounds cannot be checked")]
    cutoff = (now_utc() - timedelta(days=limits.max_days)).strftime("%Y%m%d%H%M%S")
    total = old = 0
    for entry in entries:
        if entry.record is None or entry.record.text is None:
            continue
        total += entry.record.body_bytes
        old += age_key(entry) < cutoff
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


SHOWN = 5  # files named in one finding; the count is always whole


def _first(entries: list[Entry]) -> str:
    """The first few file names, and how many more: a person sees where to look, never a wall of names."""
    names = ", ".join(e.name for e in entries[:SHOWN])
    return names + (f" and {len(entries) - SHOWN} more" if len(entries) > SHOWN else "")


def _shape(layout: Layout, entries: list[Entry], rel: str) -> list[Finding]:
    out: list[Finding] = []
    names = set(os.listdir(layout.prompts_dir))
    refused = [e for e in entries if e.record is None]
    if refused:
        out.append(Finding("FAIL", "capture", rel, f"{len(refused)} file(s) under a record's name are not records "
                           f"this writer can account for: {_first(refused)} (the first {refused[0].problem})"))
    ugly = [e for e in entries if e.record is not None and not e.pretty]
    if ugly:
        out.append(Finding("FAIL", "capture", rel, f"{len(ugly)} record(s) are not in the pretty one-member-per-line "
                           "shape of majordomus.capture/v1", RENDER))
    leaky = [e for e in entries if e.record is not None and any(w in k for k in e.record.members() for w in FORBIDDEN)]
    if leaky:
        out.append(Finding("FAIL", "capture", rel, f"{len(leaky)} record(s) carry a member that looks like a model "
                           "response or transcript; the archive keeps what the person typed, nothing else"))
    unrendered = [e for e in entries if e.record is not None
                  and (f"{e.stem}.md" not in names or f"{e.stem}.yaml" not in names)]
    if unrendered:
        out.append(Finding("FAIL", "capture", rel, f"{len(unrendered)} record(s) lack a rendering (.md or .yaml): "
                           f"{_first(unrendered)}", RENDER))
    missing = {e.name for e in unrendered}
    stale = [e for e in entries if e.record is not None and e.name not in missing
             and disagreeing(layout.prompts_dir, e.stem, e.record)]
    if stale:
        out.append(Finding("FAIL", "capture", rel, f"{len(stale)} record(s) have a rendering that says something else "
                           f"than the record (a rewrite was cut short; it may still show a pruned body): "
                           f"{_first(stale)}", RENDER))
    stems = {e.stem for e in entries}
    strays = sorted(n for n in names if not n.startswith(".") and n.endswith((".md", ".yaml"))
                    and n.rsplit(".", 1)[0] not in stems)
    if strays:
        out.append(Finding("WARN", "capture", rel, f"{len(strays)} rendering(s) have no record beside them; a "
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
        out.append(Finding("OK", "capture", rel, f"{len(entries)} record(s) in the majordomus.capture/v1 shape, each "
                           "with both renderings; no failed capture logged"))
    return out
