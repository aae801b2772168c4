"""`episodes`, `show`, `search`: reading the record back. Thin: the work is in `majordomus.history`."""

from __future__ import annotations

import json
import sys
from typing import Any

from majordomus.archive.render import tombstone
from majordomus.commands.context import Context, parser
from majordomus.errors import MissingError, UsageError
from majordomus.history import detail, index, text, views
from majordomus.history.timeline import STATES, Episode, Filters, all_episodes, by_prefix, parse_moment, select
from majordomus.layout import Layout
from majordomus.usage.episode import columns, known, policy_overrides, usage_json, usage_of


def _print_json(data: dict[str, Any]) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False))


def _note(note: str | None) -> None:
    if note:
        print(f"majordomus: {note}", file=sys.stderr)


def _positive(raw: str) -> int:
    import argparse

    try:
        n = int(raw)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"-n takes a whole number of episodes above 0, not {raw!r}")
    return n


def _filter_parser(prog: str, description: str):  # type: ignore[no-untyped-def]
    p = parser(prog, description)
    p.add_argument("--outcome", choices=STATES, help="only episodes in this state (closed, interrupted, open, "
                                                     "detached)")
    p.add_argument("--provider", help="only this client's episodes (claude-code, codex, gemini, generic, …)")
    p.add_argument("--branch", help="only episodes on this branch")
    p.add_argument("--since", help="started at or after: a date, a UTC time, or an age (3d, 12h)")
    p.add_argument("--until", help="started at or before: a date, a UTC time, or an age")
    p.add_argument("--open", dest="open_only", action="store_true", help="only open and detached episodes")
    p.add_argument("-n", dest="limit", type=_positive, help="at most this many")
    p.add_argument("--json", action="store_true", help="one JSON object (the same as the global --json)")
    return p


def _filters(args: Any) -> Filters:
    since = parse_moment(args.since, "--since") if args.since else None
    until = parse_moment(args.until, "--until") if args.until else None
    if since and until and since > until:
        raise UsageError(f"--since {args.since} is after --until {args.until}", "swap them")
    return Filters(outcome=args.outcome, provider=args.provider, branch=args.branch, since=since, until=until,
                   open_only=args.open_only, limit=args.limit)


def episodes_command(ctx: Context, argv: list[str]) -> int:
    p = _filter_parser("episodes", "The episodes of this repository, newest first.")
    args = p.parse_args(argv)
    filters = _filters(args)
    layout = Layout(ctx.root).require()
    found = views.listing(layout, filters)
    _note(found.note)
    if ctx.json or args.json:
        _print_json(found.to_json(layout.root))
        return 0
    if not found.episodes:
        print("no episodes" + (" match these filters" if argv else " recorded here yet"))
        return 0
    for line in text.episode_rows(found.episodes, found.counts, text.use_colour(sys.stdout), found.usages,
                                  found.prices):
        print(line)
    return 0


# -- show -----------------------------------------------------------------------------------------------------
def show_command(ctx: Context, argv: list[str]) -> int:
    p = parser("show", "One episode whole (by id or a prefix of it), or the episodes a commit was made in.")
    p.add_argument("what", help="an episode id, a prefix of one, or a commit")
    p.add_argument("--json", action="store_true", help="one JSON object (the same as the global --json)")
    args = p.parse_args(argv)
    as_json = ctx.json or args.json
    layout = Layout(ctx.root).require()
    episodes = all_episodes(layout)
    arg = args.what.strip()
    matches = by_prefix(episodes, arg)
    commit = None if arg.startswith("s-") or (len(matches) == 1 and matches[0].id == arg) \
        else detail.resolve_commit(layout, arg)
    if len(matches) > 1 or (matches and commit is not None):
        what = f"{len(matches)} episode(s)" + (f" and commit {commit.sha[:12]} ({commit.subject})" if commit else "")
        print(f"majordomus: '{arg}' is ambiguous: it names {what}; give more of the id", file=sys.stderr)
        for e in matches:
            print(f"  {e.id}  {e.provider or '-'}  {e.state}  {text.when(e.started_at)}", file=sys.stderr)
        return 2
    if matches:
        return _show_episode(layout, matches[0], as_json)
    if commit is not None:
        return _show_commit(layout, episodes, commit, as_json)
    raise MissingError(f"no episode id starts with '{arg}', and it is not a commit of this repository",
                       "run majordomus episodes to see the ids")


def _show_episode(layout: Layout, e: Episode, as_json: bool) -> int:
    if as_json:
        data, note = views.whole(layout, e)
        _note(note)
        _print_json(data)
        return 0
    idx = index.opened(layout)
    try:
        _note(idx.note)
        names = idx.prompt_names(e.id)
    finally:
        idx.close()
    prompts = detail.load_prompts(layout, names)
    commits = detail.window_commits(layout, e)
    stat, stat_range = detail.diff_stat(layout, e)
    resume = detail.resume_of(layout, e)
    head = detail.current_head(layout, e)
    used = usage_json(usage_of(layout, e, known(layout).get(e.id)), policy_overrides(layout))
    colour = text.use_colour(sys.stdout)
    how = e.state
    if e.end_reason or e.last_turn:
        bits = [f"reason {e.end_reason}" if e.end_reason else None,
                f"last turn {e.last_turn}" if e.last_turn and e.last_turn != "none" else None]
        how += f" ({', '.join(b for b in bits if b)})" if any(bits) else ""
    out = [f"episode {e.id}  {text.paint(how, text.COLOURS.get(e.state), colour)}"]
    rel = str(e.path.relative_to(layout.root)) if e.path and e.path.is_relative_to(layout.root) else "-"
    rows = [("provider", e.provider or "- (not recorded by the writer of this record)"),
            ("title", e.title or "-"), ("started", e.started_at or "-"),
            ("closed" if not e.is_open else "state", (f"{e.closed_at}  ({text.duration(e.duration_seconds())})"
                                                      if not e.is_open else
                                                      f"{e.state} for {text.duration(e.duration_seconds())}"
                                                      + (f", detached since {e.detached_at}" if e.detached_at
                                                         else ""))),
            ("branch", e.branch or "-"),
            ("heads", f"{(e.start_head or '-')[:7]} → {(head or '-')[:7]}" + ("  (now)" if e.is_open else "")),
            ("compactions", str(e.compactions)), ("record" if not e.is_open else "open file", rel)]
    rows += text.usage_rows(used)
    if e.schema_note:
        rows.append(("schema", e.schema_note))
    if resume is not None:
        rows.append(("resume", resume.sentence))
    out += [f"  {k:<12} {v}" for k, v in rows]
    out += ["", f"prompts ({len(prompts)})" + ("" if prompts else ": none linked to this episode")]
    for n, pr in enumerate(prompts, 1):
        r = pr.record
        if r is None:
            out.append(f"  {n}. {pr.name}: this record cannot be read ({pr.problem})")
            continue
        marks = f"  redacted: {r.redacted}" if r.redacted else ""
        out.append(f"  {n}. {r.started_at}  {r.episode_link}{marks}  {pr.name}")
        body = r.text if r.text is not None else (tombstone(r) or "(no text)")
        out += [f"     {line}" for line in body.splitlines() or [""]]
    out += ["", f"commits ({len(commits.items)}, {commits.source})" + (f"; {commits.note}" if commits.note else "")]
    out += [f"  {c} {s}".rstrip() for c, s in commits.items]
    out += ["", f"diff stat ({stat_range})"]
    out += [f"  {line}" for line in stat.splitlines()] if stat else \
        ["  no change between the heads" if stat == "" else "  -"]
    if e.changed_files:
        cut = "; cut short at the close" if "changed_files" in e.truncated else ""
        out += ["", f"working tree at the close ({len(e.changed_files)} changed{cut})"]
        out += [f"  {f}" for f in e.changed_files]
    print("\n".join(out))
    return 0


def _show_commit(layout: Layout, episodes: list[Episode], commit: detail.CommitInfo, as_json: bool) -> int:
    data, found = views.of_commit(layout, episodes, commit)
    if as_json:
        _print_json(data)
        return 0
    print(data["message"])
    if len(found) > 1:
        for c in found:
            print(f"  {c.episode.id}  {c.episode.provider or '-'}  {c.episode.state}  — {c.evidence}")
    return 0


# -- search ---------------------------------------------------------------------------------------------------
def search_command(ctx: Context, argv: list[str]) -> int:
    p = _filter_parser("search", "Search prompt texts and episode titles, branches and changed files "
                                 "(SQLite FTS5 query syntax: words, \"phrases\", OR, NOT, prefix*).")
    p.add_argument("query", nargs="+", help="the words to find; quote a word with punctuation: '\"api-key\"'")
    args = p.parse_args(argv)
    filters = _filters(args)
    query = " ".join(args.query)
    index.check_query(query)  # a usage error before the index is touched
    layout = Layout(ctx.root).require()
    found = views.search(layout, query, filters)
    _note(found.note)
    if ctx.json or args.json:
        _print_json(found.to_json(query))
        return 0
    if not found.chosen:
        if found.totals is not None:
            print(f"no match for {query!r} in {found.totals[0]} prompt record(s) and {found.totals[1]} episode "
                  "record(s)")
        else:
            print(f"no match for {query!r} passes these filters ({found.matched} match(es) without them)")
        return 0
    colour = text.use_colour(sys.stdout)
    on, off = ("\x1b[1;33m", "\x1b[0m") if colour else ("**", "**")
    for h, e in found.chosen:
        where = h.episode or f"no episode ({h.link})"
        kind = "prompt" if h.kind == "prompt" else "episode"
        link = h.link if h.kind == "prompt" else (e.state if e else h.link)
        state = f" {e.state}" if e is not None and h.kind == "prompt" else ""
        used = found.usages.get(e.id) if e is not None else None
        tokens, cost = columns(used, found.prices)
        spent = f"  {tokens} tokens {cost}" if used is not None and used.state == "counted" else ""
        print(f"{where}{state}  {h.at or '-'}  {kind} {link}  {h.name}{spent}")
        print(f"    {views.marked(h.snippet, on, off)}")
    return 0


# -- export ---------------------------------------------------------------------------------------------------
def _chosen_by_ids(episodes: list[Episode], wanted: list[str]) -> list[Episode]:
    chosen: dict[str, Episode] = {}
    for arg in wanted:
        found = by_prefix(episodes, arg)
        if not found:
            raise MissingError(f"no episode id starts with '{arg}'", "run majordomus episodes to see the ids")
        if len(found) > 1:
            names = ", ".join(f"{e.id} ({e.state}, {text.when(e.started_at)})" for e in found[:20])
            more = f" and {len(found) - 20} more" if len(found) > 20 else ""
            raise UsageError(f"'{arg}' is ambiguous: it names {len(found)} episodes: {names}{more}",
                             "give more of the id")
        chosen.setdefault(found[0].id, found[0])
    return [e for e in episodes if e.id in chosen]  # newest first, as everywhere


def _dry_line(item: Any) -> str:
    """One line of `export --otlp --dry-run`: an episode's span, or a prompt's log record, in brief."""
    from majordomus.telemetry import records

    if isinstance(item, records.Span):
        a = item.attributes
        why = f" ({item.description})" if item.description else ""
        return (f"span {item.episode} {a.get('gen_ai.agent.name', '-')} {a.get('majordomus.episode.outcome')}{why} "
                f"{(item.end - item.start) // 1_000_000_000}s {len(item.events)} event(s) trace {item.trace_id:032x}")
    a = item.attributes
    return (f"log  {a.get('session.id', '-')} {a['majordomus.prompt.episode_link']} {a['majordomus.prompt.length']} "
            f"chars, redacted {','.join(a['majordomus.prompt.redacted']) or '-'}"
            f"{', with its text' if item.body is not None else ''}")


def _otlp(ctx: Context, args: Any, filters: Filters, argv: list[str]) -> int:
    from majordomus.telemetry import otlp

    if args.episode or filters != Filters() or args.output or "--format" in argv:
        raise UsageError("export --otlp sends every ended episode its endpoint has not accepted; it takes no ids, "
                         "filters, --format or -o", "leave those out (the cursor says what is new)")
    where = otlp.endpoints(args.otlp)
    layout = Layout(ctx.root).require()
    as_json = ctx.json or args.json

    def dry(item: Any) -> None:
        print(json.dumps(item.to_json(), ensure_ascii=False) if as_json else _dry_line(item))

    def told(report: otlp.Report) -> None:
        what = "would send" if args.dry_run else "sent"
        print(f"majordomus: {what} {report.spans} episode span(s) and {report.logs} prompt log record(s) to "
              f"{where.shown} ({report.accepted_spans} episode(s) and {report.accepted_logs} prompt(s) accepted "
              f"before{'; prompt texts included' if args.with_prompts else ''})", file=sys.stderr)

    told(otlp.export(layout, where, with_prompts=args.with_prompts, dry=dry if args.dry_run else None,
                     progress=told))
    return 0


def export_command(ctx: Context, argv: list[str]) -> int:
    from majordomus.history import export

    p = _filter_parser("export", "The episodes as Markdown (md), JSON (json) or one self-contained HTML page "
                                 "(html); prompt texts only with --with-prompts.")
    p.add_argument("--format", choices=export.FORMATS, default="md", help="md (default), json or html")
    p.add_argument("-o", "--output", metavar="FILE", help="write here (0600, replaced whole) instead of stdout")
    p.add_argument("--with-prompts", action="store_true", help="include the prompt texts (private by default)")
    p.add_argument("--otlp", nargs="?", const="", metavar="ENDPOINT",
                   help="send the ended episodes (spans) and the prompts' metadata (log records) over OTLP/HTTP "
                        "to ENDPOINT (default: the OTEL_EXPORTER_OTLP_* variables); only what it has not accepted "
                        "yet (docs/otlp.md)")
    p.add_argument("--dry-run", action="store_true",
                   help="with --otlp: print what would be sent, one line each; send nothing")
    p.add_argument("episode", nargs="*", help="episode ids or prefixes (default: every episode the filters admit)")
    args = p.parse_args(argv)
    filters = _filters(args)
    if args.otlp is not None:
        return _otlp(ctx, args, filters, argv)
    if args.dry_run:
        raise UsageError("--dry-run goes with --otlp", "add --otlp ENDPOINT, or leave --dry-run out")
    fmt = "json" if (ctx.json or args.json) and args.format == "md" and "--format" not in argv else args.format
    layout = Layout(ctx.root).require()
    episodes = all_episodes(layout)
    if args.episode:
        episodes = _chosen_by_ids(episodes, args.episode)
    chosen = select(episodes, filters)
    filtered = bool(args.episode) or filters != Filters()
    out = export.Output(args.output, sys.stdout)
    n = export.export(layout, chosen, fmt, out, with_prompts=args.with_prompts, filtered=filtered)
    if args.output:
        print(f"majordomus: {n} episode(s) written to {args.output} ({fmt}, mode 0600"
              f"{', with prompt texts' if args.with_prompts else ', prompt texts withheld'})", file=sys.stderr)
    return 0
