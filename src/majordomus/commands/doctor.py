"""`majordomus doctor`: every finding, one per line; exit 10 when one FAILs."""

from __future__ import annotations

from majordomus.commands.context import Context, parser
from majordomus.doctor import findings
from majordomus.layout import Layout


def command(ctx: Context, argv: list[str]) -> int:
    p = parser("doctor", "Findings, one per line: LEVEL category subject — message  [reproduce: cmd].")
    p.add_argument("--json", action="store_true", help="one JSON object per finding, one per line")
    args = p.parse_args(argv)
    found = findings(Layout(ctx.root))
    as_json = ctx.json or args.json
    for finding in found:
        print(finding.json_line() if as_json else finding.line())
    return 10 if any(f.level == "FAIL" for f in found) else 0
