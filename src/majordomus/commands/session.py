"""`majordomus capture session`: the hook's entry. Reads the payload, prints the one report line on stderr, exits 0."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from majordomus.commands.context import Context, parser, quick_flags

if TYPE_CHECKING:
    from pathlib import Path


def command(ctx: Context, argv: list[str]) -> int:
    quick = quick_flags(argv, ("--provider", "--event"))
    if quick is not None and not _dry(quick):
        _git_early(ctx.root, str(quick.get("event")))
    try:
        return _command(ctx, argv, quick)
    finally:
        from majordomus.identity import drop_early

        drop_early()


def _dry(flags: dict[str, str | bool]) -> bool:
    return bool(flags.get("dry_run")) or os.environ.get("MAJORDOMUS_SESSION_DRY_RUN") == "1"


def _git_early(root: Path, event: str) -> None:
    """The `git status` a start or an end will ask for, started now: it runs on another core while this process
    imports the boundary and reads the episode (2-3 ms of a hook's wall time). What no one asks for (an episode
    open already, nothing to close) is stopped when the command ends."""
    if event not in ("start", "end") or not os.path.isdir(os.path.join(os.fspath(root), ".ai", "local", "state")):
        return
    from majordomus.identity import CHANGED_FILES, START_STATUS, git_argv, start_early

    start_early(git_argv(root, *(START_STATUS if event == "start" else CHANGED_FILES)))


def _command(ctx: Context, argv: list[str], quick: dict[str, str | bool] | None) -> int:
    from majordomus.clients.payload import read_stdin
    from majordomus.episodes.hook import EVENTS, run_session

    if quick is None or "provider" not in quick or quick.get("event") not in EVENTS:
        p = parser("capture session", "Draw one episode boundary from a client's hook payload on stdin.")
        p.add_argument("--provider", required=True)
        p.add_argument("--event", required=True, choices=EVENTS)
        p.add_argument("--dry-run", action="store_true", help="say what would happen; write nothing")
        args = p.parse_args(argv)
        quick = {"provider": args.provider, "event": args.event, "dry_run": args.dry_run}
    payload = read_stdin()
    report = run_session(ctx.root, str(quick["provider"]), str(quick["event"]), payload, dry_run=_dry(quick))
    line = report.line
    if report.drawn is not None and quick["event"] == "start":
        from majordomus.clients.providers import get_provider

        provider = get_provider(str(quick["provider"]))
        if provider.state_file is not None and provider.state_file.prompt_key:  # Cline: its task's first message
            from majordomus.archive.start_prompt import capture_start_prompt

            said = capture_start_prompt(ctx.root, provider, payload)
            line = f"{line}; {said}" if said else line
    print(line, file=sys.stderr)
    return report.exit_code
