"""`init`, `update` and `history --rotate`: the layer's own commands."""

from __future__ import annotations

import os

from majordomus import ledger
from majordomus.commands.context import Context, parser
from majordomus.errors import InternalError, MissingError, RefusedError
from majordomus.layer import converge
from majordomus.layout import Layout
from majordomus.policy import load_policy


def init_command(ctx: Context, argv: list[str]) -> int:
    parser("init", "Create the .ai/ layer in this repository.").parse_args(argv)
    layout = Layout(ctx.root)
    try:
        os.mkdir(layout.ai, 0o755)  # exclusive: of two inits at once, exactly one goes on
    except FileExistsError:
        raise RefusedError(f"{layout.ai} exists already; init never overwrites a layer",
                           "run majordomus update") from None
    except OSError as exc:
        raise InternalError(f"cannot create {layout.ai} ({exc.strerror})") from exc
    for line in converge(layout):
        print(line)
    print(f"majordomus layer initialised in {layout.root}")
    return 0


def update_command(ctx: Context, argv: list[str]) -> int:
    parser("update", "Converge the .ai/ layer: add what is missing, repair modes; never remove.").parse_args(argv)
    layout = Layout(ctx.root)
    if not layout.ai.is_dir():
        raise MissingError(f"{layout.root} has no majordomus layer", "run majordomus init")
    changed = converge(layout)
    for line in changed:
        print(line)
    print("layer up to date" if not changed else f"{len(changed)} change(s)")
    return 0


def history_command(ctx: Context, argv: list[str]) -> int:
    p = parser("history", "Rotate the ledger: keep the newest ledger.retention_max_lines lines.")
    p.add_argument("--rotate", action="store_true", required=True)
    p.parse_args(argv)
    layout = Layout(ctx.root)
    layout.require()
    keep = load_policy(layout).get_int("ledger.retention_max_lines")
    print(ledger.rotate(layout, keep))
    return 0
