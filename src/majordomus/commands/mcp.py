"""`majordomus mcp …` and `majordomus serve …`: the MCP server's commands (`majordomus-mcp` is the same entry)."""

from __future__ import annotations

from pathlib import Path

from majordomus.commands.context import Context


def _wants_help(argv: list[str]) -> bool:
    return "-h" in argv or "--help" in argv


def mcp_command(ctx: Context, argv: list[str]) -> int:
    from majordomus.mcp.server import mcp_main

    return mcp_main(Path("."), argv) if _wants_help(argv) else mcp_main(ctx.root, argv)


def serve_command(ctx: Context, argv: list[str]) -> int:
    from majordomus.mcp.server import serve_main

    return serve_main(Path("."), argv) if _wants_help(argv) else serve_main(ctx.root, argv)
