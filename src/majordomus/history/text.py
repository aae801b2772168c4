"""How the history reads for a person: columns like `git log --oneline`, colour only on a terminal."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from majordomus.history.timeline import Episode
from majordomus.usage.episode import Usage, columns, dollars
from majordomus.usage.prices import Price

COLOURS = {"closed": "32", "interrupted": "31", "open": "36", "detached": "33"}  # green, red, cyan, yellow


def use_colour(stream: object) -> bool:
    """Colour on a terminal only, and never with NO_COLOR set or TERM=dumb (https://no-color.org)."""
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) and "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb"


def paint(text: str, code: str | None, colour: bool) -> str:
    return f"\x1b[{code}m{text}\x1b[0m" if colour and code else text


def duration(seconds: int | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    if seconds < 86400:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 86400}d{seconds % 86400 // 3600:02d}h"


def when(stamp: str | None) -> str:
    """`2026-12-02 08:00` (UTC) from an RFC 3339 stamp; `-` when there is none."""
    if not stamp:
        return "-"
    return stamp.replace("T", " ")[:16] if len(stamp) >= 16 else stamp


def table(rows: Sequence[Sequence[str]], colours: Sequence[str | None], colour: bool) -> list[str]:
    """Columns padded to their widest cell (the last one is not padded); `colours` per row, for column 3."""
    if not rows:
        return []
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for row, code in zip(rows, colours):
        cells = [cell.ljust(widths[i]) if i < len(row) - 1 else cell for i, cell in enumerate(row)]
        cells[2] = paint(cells[2], code, colour)
        out.append("  ".join(cells).rstrip())
    return out


def episode_rows(episodes: Sequence[Episode], counts: dict[str, int], colour: bool, usages: dict[str, Usage],
                 prices: dict[str, Price]) -> list[str]:
    rows = [(e.id, e.provider or "-", e.state, when(e.started_at),
             duration(e.duration_seconds()) + ("+" if e.is_open else ""), e.branch or "-",
             str(counts.get(e.id, 0)), *columns(usages.get(e.id), prices), e.title or "-") for e in episodes]
    return table(rows, [COLOURS.get(e.state) for e in episodes], colour)


def usage_rows(used: dict[str, Any]) -> list[tuple[str, str]]:
    """`show`'s rows for the usage member of `show --json`: the tokens, each model, the cost, or why not."""
    if used["state"] != "counted":
        return [("usage", used["note"] or used["state"])]
    kinds = ("input", "output", "cache_read", "cache_write")
    total = sum(used[f"{k}_tokens"] for k in kinds)
    rows = [("tokens", f"{total:,}: " + " · ".join(f"{k.replace('_', ' ')} {used[f'{k}_tokens']:,}" for k in kinds))]
    for m in used["models"]:
        price = m["price"]
        cost = "price unknown" if m["cost_usd"] is None else (
            f"{dollars(m['cost_usd'])} at {'the policy' if price['source'] == 'policy' else 'the table'}'s price"
            + (f" of {price['as_of']}" if price["source"] == "table" else ""))
        tokens = sum(m[f"{k}_tokens"] for k in kinds)
        rows.append(("model", f"{m['model']}: {m['requests']} request(s), {tokens:,} tokens, {cost}"))
    rows.append(("cost", used["cost"] or "-"))
    if used["note"]:
        rows.append(("usage note", used["note"]))
    return rows
