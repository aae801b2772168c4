"""`majordomus capture session`: reads the hook payload, prints the one report line on stderr, exits 0."""

from __future__ import annotations

import os
import sys

from majordomus.cli import Context, parser
from majordomus.episodes.boundary import EVENTS, run_session

PAYLOAD_LIMIT = 16 * 1024 * 1024  # a hook payload is small; past this we stop reading, not crash


def read_stdin() -> bytes:
    if sys.stdin is None or sys.stdin.isatty():
        return b""
    return sys.stdin.buffer.read(PAYLOAD_LIMIT)


def quick_flags(argv: list[str]) -> dict[str, str | bool] | None:
    """The hook's own argument shape, parsed without argparse (whose import costs every hook ~2 ms).

    None for anything else (help, a typo): argparse then parses it and says what is wrong.
    """
    flags: dict[str, str | bool] = {}
    rest = list(argv)
    while rest:
        word = rest.pop(0)
        if word == "--dry-run":
            flags["dry_run"] = True
        elif word in ("--provider", "--event") and rest and not rest[0].startswith("-"):
            flags[word[2:]] = rest.pop(0)
        else:
            return None
    if "provider" not in flags or flags.get("event") not in EVENTS:
        return None
    return flags


def command(ctx: Context, argv: list[str]) -> int:
    quick = quick_flags(argv)
    if quick is not None:
        dry = bool(quick.get("dry_run")) or os.environ.get("MAJORDOMUS_SESSION_DRY_RUN") == "1"
        report = run_session(ctx.root, str(quick["provider"]), str(quick["event"]), read_stdin(), dry_run=dry)
        print(report.line, file=sys.stderr)
        return report.exit_code
    p = parser("capture session", "Draw one episode boundary from a client's hook payload on stdin.")
    p.add_argument("--provider", required=True)
    p.add_argument("--event", required=True, choices=EVENTS)
    p.add_argument("--dry-run", action="store_true", help="say what would happen; write nothing")
    args = p.parse_args(argv)
    dry = args.dry_run or os.environ.get("MAJORDOMUS_SESSION_DRY_RUN") == "1"
    report = run_session(ctx.root, args.provider, args.event, read_stdin(), dry_run=dry)
    print(report.line, file=sys.stderr)
    return report.exit_code
