"""`majordomus capture install --provider P` / `--git`: wire a client (or git), and say what changed."""

from __future__ import annotations

from majordomus.clients.install import install
from majordomus.commands.context import Context, parser
from majordomus.errors import UsageError


def command(ctx: Context, argv: list[str]) -> int:
    p = parser("capture install", "Wire a client: merge majordomus's hook entries and MCP server entry into its "
                                  "files; --git: a prepare-commit-msg hook naming the episode of a commit.")
    p.add_argument("--provider")
    p.add_argument("--git", action="store_true", help="add the prepare-commit-msg hook (Majordomus-Episode trailer)")
    args = p.parse_args(argv)
    if not args.provider and not args.git:
        raise UsageError("capture install needs --provider P or --git", "e.g. majordomus capture install --git")
    if args.provider:
        for line in install(ctx.root, args.provider):
            print(line)
    if args.git:
        from majordomus.clients.git_hook import install_git

        for line in install_git(ctx.root):
            print(line)
    return 0


def uninstall_command(ctx: Context, argv: list[str]) -> int:
    p = parser("capture uninstall", "Take out exactly what capture install added for a client (or git), and nothing "
                                    "of yours: a file install did not change since gets its old bytes back.")
    p.add_argument("--provider")
    p.add_argument("--git", action="store_true", help="remove the prepare-commit-msg hook, restoring yours")
    p.add_argument("--dry-run", action="store_true", help="say what would be removed; change nothing")
    args = p.parse_args(argv)
    if not args.provider and not args.git:
        raise UsageError("capture uninstall needs --provider P or --git", "e.g. majordomus capture uninstall --git")
    if args.provider:
        from majordomus.clients.uninstall import uninstall

        for line in uninstall(ctx.root, args.provider, dry_run=args.dry_run):
            print(line)
    if args.git:
        from majordomus.clients.git_hook import uninstall_git

        for line in uninstall_git(ctx.root, dry_run=args.dry_run):
            print(line)
    return 0
