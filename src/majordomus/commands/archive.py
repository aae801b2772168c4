"""`capture reconcile`, `capture prune`, `capture render`: the archive's maintenance commands.

Each says one sentence (or, with `--json`, one object carrying the same sentence as `message`).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from majordomus.archive.prune import bounds, prune, sentence
from majordomus.archive.reconcile import reconcile
from majordomus.archive.repair import render_all, repair_modes
from majordomus.archive.scan import has_archive, lock_archive
from majordomus.commands.context import Context, parser
from majordomus.layout import Layout


def _say(ctx: Context, line: str, data: dict[str, Any]) -> None:
    print(json.dumps({"message": line, **data}) if ctx.json else line)
    sys.stdout.flush()


def reconcile_command(ctx: Context, argv: list[str]) -> int:
    p = parser("capture reconcile", "Link prompt records to their episodes on evidence only.")
    p.add_argument("--dry-run", action="store_true", help="say what would be linked; write nothing")
    args = p.parse_args(argv)
    layout = Layout(ctx.root).require()
    result = reconcile(layout, dry_run=args.dry_run)
    _say(ctx, result.sentence(args.dry_run),
         {"dry_run": args.dry_run, "records": result.records, "linked": result.linked,
          "already_linked": result.already, "unlinked": result.unlinked, "refused": result.refused,
          "refused_first": result.refused_files.first})
    return 0


def prune_command(ctx: Context, argv: list[str]) -> int:
    p = parser("capture prune", "Apply the retention policy to prompt bodies; records are never deleted.")
    p.add_argument("--dry-run", action="store_true", help="say what would be pruned; write nothing")
    args = p.parse_args(argv)
    layout = Layout(ctx.root).require()
    limits = bounds(layout)  # a broken policy refuses (10) even when there is nothing to prune
    if not has_archive(layout):
        line = f"no archive at {layout.prompts_dir.relative_to(layout.root)}; nothing to prune"
        _say(ctx, line, {"records": 0, "pruned": 0})
        return 0
    result, limits = prune(layout, dry_run=args.dry_run)
    _say(ctx, sentence(result, limits, args.dry_run),
         {"dry_run": args.dry_run, "records": result.records, "body_bytes": result.body_bytes,
          "pruned": result.pruned, "bytes_left": result.bytes_left, "refused": result.refused,
          "refused_first": result.refused_files.first, "cap": limits.max_bytes, "max_days": limits.max_days})
    return 0


def render_command(ctx: Context, argv: list[str]) -> int:
    p = parser("capture render", "Repair the prompt archive's modes over the whole directory and (re)write "
                                 "missing renderings.")
    p.add_argument("--force", action="store_true", help="compare every rendering with its record byte for byte "
                   "(not trusting its fingerprint) and rewrite those that differ")
    args = p.parse_args(argv)
    layout = Layout(ctx.root).require()
    rel = str(layout.prompts_dir.relative_to(layout.root))
    if not has_archive(layout):
        _say(ctx, f"no archive in {rel}; nothing to render", {"renderings": 0, "modes": 0})
        return 0
    with lock_archive(layout):
        # one listing: the records' and renderings' names; their modes and fingerprints from the reads and stats
        # render makes beside each record anyway, in two processes over a large archive
        renderings: set[str] = set()
        records: list[str] = []
        modes, removed, links = repair_modes(layout, renderings, records)
        done = render_all(layout, force=args.force, renderings=renderings, records=records)
        modes += done.modes + len(done.narrowed)
    written, failed, refused = done.written, done.failed, done.refused
    line = f"{written} rendering(s) written into {rel}"
    for count, words in ((modes, "file mode(s) set to 600"), (removed, "stale temp file(s) of killed captures removed"),
                         (len(links), "symbolic link(s) refused, not followed"),
                         (len(refused), "record(s) refused (this writer cannot account for every member)"),
                         (failed, "rendering(s) could not be written")):
        if count:
            line += f"; {count} {words}"
    _say(ctx, line, {"renderings": written, "modes": modes, "stale_temps_removed": removed,
                     "links_refused": len(links), "refused": len(refused), "failed": failed})
    return 13 if failed else 0


def scrub_command(ctx: Context, argv: list[str]) -> int:
    from majordomus.archive.scrub import HISTORY, scrub_layer

    p = parser("capture scrub", "Redact credentials that records written before today's redaction still hold, in "
                                "place; never rewrites git history.")
    p.add_argument("--dry-run", action="store_true", help="name what would change; write nothing")
    args = p.parse_args(argv)
    layout = Layout(ctx.root).require()
    with lock_archive(layout):
        changes = scrub_layer(layout, dry_run=args.dry_run)
    verb = "would redact" if args.dry_run else "redacted"
    for change in changes:
        moved = f"; renamed to {change.renamed_to}" if change.renamed_to else ""
        line = f"{verb} {change.rel} ({', '.join(change.rules)}){moved}"
        print(json.dumps({"file": change.rel, "rules": list(change.rules), "renamed_to": change.renamed_to,
                          "dry_run": args.dry_run}) if ctx.json else line)
    tracked = [c for c in changes if c.rel.startswith(str(layout.sessions_dir.relative_to(layout.root)))]
    summary = (f"capture scrub: {len(changes)} file(s) {verb}" if changes else
               "capture scrub: no record holds a credential the redaction rules find; nothing changed")
    if tracked and not args.dry_run:
        summary += f"; {len(tracked)} of them tracked: commit them; {HISTORY}"
    _say(ctx, summary, {"changed": len(changes), "tracked": len(tracked), "dry_run": args.dry_run})
    return 0
