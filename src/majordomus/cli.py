"""The command line: global options, a command table, and one place that turns errors into exit codes.

A command's module (under `commands/`) is imported only when that command runs: the hook commands must
start fast. Nothing imports this module but the console script and `python -m majordomus`.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from majordomus import __version__
from majordomus.commands.context import Context
from majordomus.errors import MajordomusError, UsageError

if TYPE_CHECKING:
    from collections.abc import Callable

# words -> "module:function"; each function is (Context, argv) -> exit code
COMMANDS: dict[tuple[str, ...], tuple[str, str]] = {
    ("init",): ("majordomus.commands.layer:init_command", "create the .ai/ layer here"),
    ("update",): ("majordomus.commands.layer:update_command", "converge an existing layer; never removes"),
    ("capture", "session"): ("majordomus.commands.session:command", "draw an episode boundary from a hook payload"),
    ("capture", "prompt"): ("majordomus.commands.prompt:command", "archive one prompt from a hook payload"),
    ("capture", "status"): ("majordomus.commands.status:command", "what each provider offers and how it is wired"),
    ("capture", "reconcile"): ("majordomus.commands.archive:reconcile_command", "link prompt records on evidence only"),
    ("capture", "prune"): ("majordomus.commands.archive:prune_command", "apply the retention policy to prompt bodies"),
    ("capture", "render"): ("majordomus.commands.archive:render_command",
                            "repair archive modes and missing renderings"),
    ("capture", "scrub"): ("majordomus.commands.archive:scrub_command",
                           "redact credentials older records still hold, in place"),
    ("capture", "recover"): ("majordomus.commands.recover:command", "close episodes whose end never came"),
    ("capture", "install"): ("majordomus.commands.install:command", "wire a client's hooks and MCP entry"),
    ("capture", "uninstall"): ("majordomus.commands.install:uninstall_command",
                               "take out exactly what capture install added"),
    ("episodes",): ("majordomus.commands.browse:episodes_command", "the episodes of this repository, newest first"),
    ("show",): ("majordomus.commands.browse:show_command", "one episode whole, or the episodes a commit was made in"),
    ("search",): ("majordomus.commands.browse:search_command", "search prompts and episodes (SQLite FTS5)"),
    ("export",): ("majordomus.commands.browse:export_command",
                  "the episodes as Markdown, JSON or one self-contained HTML page"),
    ("doctor",): ("majordomus.commands.doctor:command", "findings, one per line"),
    ("history",): ("majordomus.commands.layer:history_command", "history --rotate: archive old ledger lines"),
    ("mcp",): ("majordomus.commands.mcp:mcp_command", "the MCP server (stdio, joining the shared HTTP server)"),
    ("serve",): ("majordomus.commands.mcp:serve_command", "the shared HTTP server without a stdio client"),
}


def usage() -> str:
    lines = [f"usage: majordomus [--repo ROOT] [--json] <command> …   (majordomus {__version__})", "", "commands:"]
    lines += [f"  {' '.join(words):<20} {help_}" for words, (_, help_) in COMMANDS.items()]
    return "\n".join(lines)


def _split(argv: list[str]) -> tuple[Context, tuple[str, ...], list[str]]:
    ctx = Context()
    rest = list(argv)
    while rest and rest[0].startswith("-"):
        opt = rest.pop(0)
        if opt == "--json":
            ctx.json = True
        elif opt == "--repo" and rest:
            ctx.repo = rest.pop(0)
        elif opt.startswith("--repo="):
            ctx.repo = opt.split("=", 1)[1]
        elif opt in ("-h", "--help"):
            print(usage())
            raise SystemExit(0)
        elif opt == "--version":
            print(f"majordomus {__version__}")
            raise SystemExit(0)
        else:
            raise UsageError(f"unknown option {opt}", "try 'majordomus --help'")
    for size in (2, 1):
        words = tuple(rest[:size])
        if words in COMMANDS:
            return ctx, words, rest[size:]
    if rest[:1] == ["capture"]:
        raise UsageError("capture needs one of: " + ", ".join(w[1] for w in COMMANDS if w[0] == "capture"),
                         "try 'majordomus --help'")
    raise UsageError(f"unknown command '{' '.join(rest[:1])}'" if rest else "no command given",
                     "try 'majordomus --help'")


def _handler(words: tuple[str, ...]) -> Callable[[Context, list[str]], int]:
    module, _, func = COMMANDS[words][0].partition(":")
    __import__(module)  # importlib would add ~1 ms (and `warnings`) to every hook run
    return getattr(sys.modules[module], func)  # type: ignore[no-any-return]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    try:
        ctx, words, rest = _split(args)
        return _handler(words)(ctx, rest)
    except MajordomusError as err:
        print(err.line(), file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except OSError as err:  # a full disk, a read-only file system: a sentence and exit 13, never a traceback
        where = f" ({err.filename})" if err.filename else ""
        print(f"majordomus: {err.strerror or type(err).__name__}{where}; free space on that disk (or fix the file "
              f"system), then run the command again", file=sys.stderr)
        return 13
