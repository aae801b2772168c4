"""`majordomus capture status`: one row per provider and aspect, for people or as one JSON object."""

from __future__ import annotations

import json
from dataclasses import asdict

from majordomus.clients.status import SCHEMA, render_text, rows
from majordomus.commands.context import Context, parser


def command(ctx: Context, argv: list[str]) -> int:
    p = parser("capture status", "Per provider and aspect: capability, state, reason, evidence.")
    p.add_argument("--json", action="store_true", help="one JSON object: " + SCHEMA)
    args = p.parse_args(argv)
    from majordomus.layout import Layout

    layout = Layout(ctx.root)
    if layout.is_initialised():
        from majordomus.episodes.vanished import end_vanished_quietly

        end_vanished_quietly(layout)  # status reads the episodes too: a vanished client's end first (SPEC 4.4)
    found = rows(ctx.root)
    if ctx.json or args.json:
        print(json.dumps({"schema": SCHEMA, "providers": [asdict(r) for r in found]}, ensure_ascii=False))
    else:
        print(render_text(found))
    return 0
