"""`majordomus capture recover [--dry-run]`: close the episodes whose end never came, and say which."""

from __future__ import annotations

from majordomus.commands.context import Context, parser
from majordomus.layout import Layout


def command(ctx: Context, argv: list[str]) -> int:
    p = parser("capture recover", "Close stale hook episodes (interrupted, reason stale) and connection episodes "
                                  "no live server holds past the grace (interrupted, reason expired).")
    p.add_argument("--dry-run", action="store_true", help="say what would be closed; write nothing")
    args = p.parse_args(argv)
    layout = Layout(ctx.root)
    layout.require()
    from majordomus.episodes.recover import recover

    lines = recover(layout.root, dry_run=args.dry_run)
    prefix = "capture recover --dry-run: " if args.dry_run else ""
    for line in lines:
        print(prefix + line)
    if not lines:
        print(f"{prefix}nothing to recover")
    elif args.dry_run:
        print(f"{prefix}nothing written")
    return 0
