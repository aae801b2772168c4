"""`majordomus capture session`: the hook's entry. Reads the payload, prints the one report line on stderr, exits 0."""

from __future__ import annotations

import sys

from majordomus.clients.payload import read_stdin
from majordomus.commands.context import Context, parser, quick_flags
from majordomus.episodes.hook import EVENTS, run_session
from majordomus.os_lite import os


def command(ctx: Context, argv: list[str]) -> int:
    quick = quick_flags(argv, ("--provider", "--event"))
    if quick is None or "provider" not in quick or quick.get("event") not in EVENTS:
        p = parser("capture session", "Draw one episode boundary from a client's hook payload on stdin.")
        p.add_argument("--provider", required=True)
        p.add_argument("--event", required=True, choices=EVENTS)
        p.add_argument("--dry-run", action="store_true", help="say what would happen; write nothing")
        args = p.parse_args(argv)
        quick = {"provider": args.provider, "event": args.event, "dry_run": args.dry_run}
    dry = bool(quick.get("dry_run")) or os.environ.get("MAJORDOMUS_SESSION_DRY_RUN") == "1"
    report = run_session(ctx.hook_root, str(quick["provider"]), str(quick["event"]), read_stdin(), dry_run=dry)
    print(report.line, file=sys.stderr)
    return report.exit_code
