"""`majordomus capture prompt`: the prompt hook's entry. Reads the payload, prints one line on stderr.

Stdlib only and argparse only for a spelling the hook never uses: this runs on every prompt a person submits.
"""

from __future__ import annotations

import sys

from majordomus.archive.capture import capture
from majordomus.clients.payload import read_stdin
from majordomus.clients.providers import get_provider
from majordomus.commands.context import Context, parser, quick_flags


def command(ctx: Context, argv: list[str]) -> int:
    quick = quick_flags(argv, ("--provider",))
    if quick is None or "provider" not in quick:  # help, a typo: the house parser and its usage sentence
        p = parser("capture prompt", "Archive one prompt from a client's prompt-hook payload on stdin.")
        p.add_argument("--provider", required=True)
        p.add_argument("--dry-run", action="store_true", help="run the real path, write nothing, say what it would do")
        args = p.parse_args(argv)
        quick = {"provider": args.provider, "dry_run": args.dry_run}
    provider = str(quick["provider"])
    get_provider(provider)  # an unknown provider is exit 12 before anything else is asked
    report = capture(ctx.root, provider, read_stdin(), dry_run=bool(quick.get("dry_run")))
    print(report.line, file=sys.stderr)  # stdout stays empty: some clients inject a hook's stdout as context
    return report.exit_code
