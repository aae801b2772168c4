"""`majordomus capture install --provider P`: wire a client, and say what changed."""

from __future__ import annotations

from majordomus.clients.install import install
from majordomus.commands.context import Context, parser


def command(ctx: Context, argv: list[str]) -> int:
    p = parser("capture install", "Wire a client: merge majordomus's hook entries and MCP server entry into its files.")
    p.add_argument("--provider", required=True)
    args = p.parse_args(argv)
    for line in install(ctx.root, args.provider):
        print(line)
    return 0
