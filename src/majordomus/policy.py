"""policy.yaml: the defaults `init` writes, the reader, and a sentence per broken key.

PyYAML is imported inside the reader only. The hook path reads a JSON cache of the parsed policy
keyed by the file's size and mtime, so a prompt never pays for a YAML parser.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from majordomus.errors import ContractError
from majordomus.layout import Layout, write_atomic

if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

DEFAULTS: dict[str, int] = {
    "prompts.retention_max_days": 90,
    "prompts.retention_max_bytes": 52428800,
    "episodes.reattach_grace_seconds": 900,
    "episodes.stateless_ttl_seconds": 120,
    "session.stale_after_hours": 24,
    "ledger.retention_max_lines": 5000,
}

# The largest value each key may take: past it a date, a timedelta or a C int overflows (1,000,000 days is
# past year 9999), and nothing sensible needs more. A larger value is a problem doctor names; the default holds.
MAXIMA: dict[str, int] = {
    "prompts.retention_max_days": 36500,  # 100 years
    "prompts.retention_max_bytes": 2**50,  # 1 PiB
    "episodes.reattach_grace_seconds": 31_536_000,  # a year
    "episodes.stateless_ttl_seconds": 31_536_000,
    "session.stale_after_hours": 876_000,  # 100 years
    "ledger.retention_max_lines": 10**9,
}

_COMMENTS: dict[str, str] = {
    "prompts": "the prompt archive: prune takes bodies past either bound, never records",
    "episodes": "connection episodes (MCP clients without hooks)",
    "session": "hook episodes whose end event never came",
    "ledger": "history --rotate keeps this many lines",
}


def default_policy_text(missing: dict[str, int] | None = None) -> str:
    """The YAML `init` writes (or `update` appends): one block per section, a comment on each."""
    values = DEFAULTS if missing is None else missing
    sections: dict[str, list[tuple[str, int]]] = {}
    for dotted, number in values.items():
        section, key = dotted.split(".", 1)
        sections.setdefault(section, []).append((key, number))
    lines = ["# majordomus policy: every key is optional; a missing key takes its default."] if missing is None else []
    for section, pairs in sections.items():
        lines.append(f"# {_COMMENTS.get(section, section)}")
        lines.append(f"{section}:")
        lines.extend(f"  {key}: {value}" for key, value in pairs)
    return "\n".join(lines) + "\n"


# `telemetry:` (docs/otlp.md): the shared server's background OTLP export. Off when absent: not a default, so
# `update` never adds it. Its endpoint is a URL in a tracked file: credentials go in OTEL_EXPORTER_OTLP_HEADERS.
TELEMETRY_KEYS = ("otlp_endpoint", "interval_seconds")
TELEMETRY_INTERVAL = 300
TELEMETRY_INTERVAL_RANGE = (10, 604_800)  # ten seconds to a week


# `usage:` (docs/usage.md): `prices:` rows by model name, dollars per 1M tokens, over the shipped price table
# (majordomus/usage/prices.yaml, checked by the same rule). Not a default either.
PRICE_KINDS = ("input", "output", "cache_read", "cache_write")
MAX_PRICE = 1_000_000  # dollars per 1M tokens: past this a row is a typo
MAX_PRICE_ROWS = 1000


@dataclass(frozen=True)
class Policy:
    values: dict[str, int]
    declared: frozenset[str] = frozenset()
    problems: tuple[str, ...] = ()
    otlp_endpoint: str | None = None  # set only when the telemetry block is valid: the background export is on
    otlp_interval_seconds: int = TELEMETRY_INTERVAL
    prices: tuple[tuple[str, dict[str, Any]], ...] = ()  # the valid rows of usage.prices, as price_row gives them

    def get_int(self, key: str) -> int:
        return self.values.get(key, DEFAULTS[key])


def _shown(value: int) -> str:
    """A number as written, or its size when it is too long to print (str() of a huge int can fail)."""
    return f"{value:,}" if value < 10**30 else "a number of more than 30 digits"


def validate_raw(raw: Any, source: Path) -> Policy:
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ContractError(f"{source} is not a mapping of sections",
                            "rewrite it as `section:` blocks, or run majordomus update")
    values = dict(DEFAULTS)
    declared: set[str] = set()
    problems: list[str] = []
    for dotted in DEFAULTS:
        section, key = dotted.split(".", 1)
        block = raw.get(section)
        if block is None:
            continue
        if not isinstance(block, dict):
            problems.append(f"{section} must be a mapping of keys")
            continue
        if key not in block:
            continue
        declared.add(dotted)  # present, valid or not: update must never add a second copy
        value = block[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            problems.append(f"{dotted} must be a whole number of at least 1")
            continue
        if value > MAXIMA[dotted]:
            problems.append(f"{dotted} must be at most {MAXIMA[dotted]:,} (it is {_shown(value)})")
            continue
        values[dotted] = value
    endpoint, interval = _telemetry(raw.get("telemetry"), problems)
    prices = _prices(raw.get("usage"), problems)
    return Policy(values=values, declared=frozenset(declared), problems=tuple(problems), otlp_endpoint=endpoint,
                  otlp_interval_seconds=interval, prices=prices)


def price_row(row: Any, where: str, problems: list[str]) -> dict[str, Any] | None:
    """A price row (`input`, `output`, `cache_read`, `cache_write` in dollars per 1M tokens, `as_of`): the cache
    prices default to the input price; a sentence in `problems`, and None, for a row that is not one."""
    if not isinstance(row, dict):
        problems.append(f"{where} must be a mapping of input, output, cache_read, cache_write (dollars per 1M "
                        "tokens)")
        return None
    unknown = sorted(str(k) for k in row if k not in (*PRICE_KINDS, "as_of"))
    if unknown:
        problems.append(f"{where} has unknown key(s) {', '.join(unknown)}; it takes input, output, cache_read, "
                        "cache_write and as_of")
        return None
    out: dict[str, Any] = {}
    for kind in PRICE_KINDS:
        found = row.get(kind, row.get("input") if kind.startswith("cache_") else None)
        if (isinstance(found, bool) or not isinstance(found, (int, float)) or found != found
                or not 0 <= found <= MAX_PRICE):
            problems.append(f"{where}.{kind} must be a number of dollars per 1M tokens from 0 to {MAX_PRICE:,}")
            return None
        out[kind] = float(found)
    if "as_of" in row:
        out["as_of"] = str(row["as_of"])
    return out


def _prices(block: Any, problems: list[str]) -> tuple[tuple[str, dict[str, Any]], ...]:
    if block is None:
        return ()
    if not isinstance(block, dict) or set(block) - {"prices"}:
        problems.append("usage must be a mapping with one key, prices (rows by model name)")
        return ()
    rows = block.get("prices") or {}
    if not isinstance(rows, dict) or len(rows) > MAX_PRICE_ROWS:
        problems.append(f"usage.prices must be a mapping of at most {MAX_PRICE_ROWS} model names to their prices")
        return ()
    out = []
    for name, row in rows.items():
        if not isinstance(name, str) or not name.strip():
            problems.append("usage.prices has a model name that is not a name")
            continue
        found = price_row(row, f"usage.prices.{name}", problems)
        if found is not None:
            out.append((name, found))
    return tuple(out)


def _telemetry(block: Any, problems: list[str]) -> tuple[str | None, int]:
    """The background export's endpoint (None: off, the default) and interval; any broken key keeps it off.
    Read without urllib: a policy is parsed on the hook path when its cache is stale."""
    if block is None:
        return None, TELEMETRY_INTERVAL
    if not isinstance(block, dict):
        problems.append("telemetry must be a mapping of keys (otlp_endpoint, interval_seconds)")
        return None, TELEMETRY_INTERVAL
    before = len(problems)
    unknown = sorted(str(k) for k in block if k not in TELEMETRY_KEYS)
    if unknown:
        problems.append(f"telemetry has unknown key(s) {', '.join(unknown)}; it takes otlp_endpoint and "
                        "interval_seconds")
    endpoint = block.get("otlp_endpoint")
    if endpoint is not None:
        scheme, _, rest = endpoint.partition("://") if isinstance(endpoint, str) else ("", "", "")
        netloc = rest.split("/", 1)[0]
        if scheme not in ("http", "https") or not netloc or any(c.isspace() for c in endpoint):
            problems.append("telemetry.otlp_endpoint must be an http:// or https:// base URL, e.g. "
                            "http://collector.internal:4318")
        elif "@" in netloc or "?" in rest or "#" in rest:
            problems.append("telemetry.otlp_endpoint must not carry credentials, a query or a fragment: policy.yaml "
                            "is shared through git; put credentials in OTEL_EXPORTER_OTLP_HEADERS where the server "
                            "runs")
    interval = block.get("interval_seconds", TELEMETRY_INTERVAL)
    low, high = TELEMETRY_INTERVAL_RANGE
    if isinstance(interval, bool) or not isinstance(interval, int) or not low <= interval <= high:
        problems.append(f"telemetry.interval_seconds must be a whole number from {low} to {high:,}")
        interval = TELEMETRY_INTERVAL
    if len(problems) > before or not isinstance(endpoint, str):
        return None, interval
    return endpoint.rstrip("/"), interval


MAX_POLICY_BYTES = 64 * 1024  # a policy is a few hundred bytes; a larger file is refused, never parsed


def _bounded_text(layout: Layout, path: Path) -> str:
    """The policy's text, read only when it is within MAX_POLICY_BYTES (a 1 GB sparse file is never read)."""
    rel = path.relative_to(layout.root)
    with open(path, "rb") as handle:
        data = handle.read(MAX_POLICY_BYTES + 1)
    if len(data) > MAX_POLICY_BYTES:
        raise ContractError(f"{rel} is larger than {MAX_POLICY_BYTES // 1024} KiB; a policy is a few keys",
                            "rewrite it from the defaults (majordomus update adds what is missing), then run "
                            "majordomus doctor")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ContractError(f"{rel} is not UTF-8 text", "fix it, then run majordomus doctor") from exc


def load_policy(layout: Layout) -> Policy:
    """Read and check policy.yaml; ContractError (exit 10) naming the file when it does not parse."""
    path = layout.policy_file
    if not path.is_file():
        return Policy(values=dict(DEFAULTS))
    import yaml  # here, and only here: the reader is the one place that needs a YAML parser

    text = _bounded_text(layout, path)
    try:
        raw = yaml.safe_load(text)
    except (yaml.YAMLError, UnicodeDecodeError, ValueError, RecursionError) as exc:  # 5,000 digits, deep nesting
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise ContractError(f"{path.relative_to(layout.root)} does not parse{where}",
                            "fix the YAML, then run majordomus doctor") from exc
    return validate_raw(raw, path)


def cached_values(layout: Layout) -> dict[str, int]:
    """The policy's values for the hook path: from the cache when it matches the file, else read once.

    A policy that does not parse gives the defaults here (the hook must not fail); doctor reports it.
    """
    path = layout.policy_file
    try:
        st = path.stat()
    except OSError:
        return dict(DEFAULTS)
    if st.st_size > MAX_POLICY_BYTES:
        return dict(DEFAULTS)  # never parsed on the hook path; doctor names it
    stamp = [st.st_size, st.st_mtime_ns]
    try:
        cached = json.loads(layout.policy_cache.read_bytes().decode("utf-8"))
        if cached.get("stamp") == stamp and isinstance(cached.get("values"), dict):
            return {**DEFAULTS, **cached["values"]}
    except (OSError, ValueError, AttributeError):  # unreadable, not JSON, or JSON but not an object
        pass
    try:
        values = load_policy(layout).values
    except ContractError:
        return dict(DEFAULTS)
    try:
        write_atomic(layout.policy_cache, json.dumps({"stamp": stamp, "values": values}).encode())
    except OSError:
        pass
    return values



class Unplaceable(Exception):
    """The missing keys have no place in this file that keeps every byte the person wrote."""


def with_missing_keys(text: str, missing: dict[str, int]) -> str:
    """`text` with each missing key inserted in the style of the mapping it joins, and nothing else changed.

    Insertions only, at positions PyYAML's nodes give: inside a flow mapping before its `}`, under a block
    mapping at its keys' column after its last pair, a new section after the file's last line (or inside a
    flow document). Every byte the person wrote stays, comments and quoting and indents with it. Raises
    Unplaceable where no such place is known (an explicit null section, a document end marker, ...); the
    caller still re-reads the result and refuses what does not read back the same.
    """
    import yaml  # the update path only, never the hook path

    newline = "\r\n" if "\r\n" in text else "\n"
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    sections: dict[str, dict[str, int]] = {}
    for dotted, number in missing.items():
        section, key = dotted.split(".", 1)
        sections.setdefault(section, {})[key] = number
    inserts: list[tuple[int, str]] = []
    if root is None or _empty(root):
        if "\n..." in "\n" + text:
            raise Unplaceable("a document end marker")
        body = _block_sections(sections, 0, 2, newline, comments=True)
        return text + ("" if not text or text.endswith(("\n", "\r")) else newline) + body
    if not isinstance(root, yaml.MappingNode):
        raise Unplaceable("not a mapping")
    unit = _indent_unit(root)
    pairs = {k.value: v for k, v in root.value if isinstance(k, yaml.ScalarNode)}  # the last of a duplicate wins
    new_sections: dict[str, dict[str, int]] = {}
    for section, keys in sections.items():
        node = pairs.get(section)
        if node is None:
            new_sections[section] = keys
        elif isinstance(node, yaml.MappingNode):
            inserts.append(_into(text, node, keys, unit, newline))
        elif _empty(node) and not root.flow_style:
            key_node = next(k for k, v in root.value if v is node)  # `section:` and nothing after it
            inserts.append(_under(text, key_node.end_mark.index, key_node.start_mark.column + unit, keys, newline))
        else:
            raise Unplaceable(f"{section} holds no mapping")
    if new_sections:
        if root.flow_style:
            inserts.append(_into_flow(root, {s: "{" + ", ".join(f"{k}: {v}" for k, v in keys.items()) + "}"
                                             for s, keys in new_sections.items()}))
        else:
            if "\n..." in "\n" + text:
                raise Unplaceable("a document end marker")
            column = root.value[0][0].start_mark.column if root.value else 0
            sep = "" if text.endswith(("\n", "\r")) else newline
            inserts.append((len(text), sep + _block_sections(new_sections, column, unit, newline, comments=False)))
    # from the end back, so each position still means what it meant; of two at one place, the first stays first
    for _, at, piece in sorted(((i, at, piece) for i, (at, piece) in enumerate(inserts)),
                               key=lambda item: (item[1], item[0]), reverse=True):
        text = text[:at] + piece + text[at:]
    return text


def _empty(node: Any) -> bool:
    """A null written as nothing at all (`section:` alone, or a document of comments)."""
    import yaml

    return isinstance(node, yaml.ScalarNode) and node.tag.endswith(":null") and node.value == ""


def _indent_unit(root: Any) -> int:
    """How far the person indents a section's keys under its name (2 when no block section says)."""
    import yaml

    for key, node in root.value:
        if isinstance(node, yaml.MappingNode) and not node.flow_style and node.value:
            step = node.value[0][0].start_mark.column - key.start_mark.column
            if step > 0:
                return int(step)
    return 2


def _block_sections(sections: dict[str, dict[str, int]], column: int, unit: int, newline: str, *,
                    comments: bool) -> str:
    pad = " " * column
    lines = []
    for section, keys in sections.items():
        if comments:
            lines.append(f"{pad}# {_COMMENTS.get(section, section)}")
        lines.append(f"{pad}{section}:")
        lines.extend(f"{pad}{' ' * unit}{key}: {number}" for key, number in keys.items())
    return newline.join(lines) + newline


def _into(text: str, node: Any, keys: dict[str, int], unit: int, newline: str) -> tuple[int, str]:
    """Where and what to insert for these keys in an existing section's mapping."""
    if node.flow_style:
        return _into_flow(node, keys)
    if not node.value:
        raise Unplaceable("an empty block mapping")
    return _under(text, node.value[-1][1].end_mark.index, node.value[0][0].start_mark.column, keys, newline)


def _under(text: str, end: int, column: int, keys: dict[str, int], newline: str) -> tuple[int, str]:
    """The keys as lines at `column`, after the line that holds position `end`."""
    line_end = text.find("\n", end)
    lines = newline.join(f"{' ' * column}{key}: {number}" for key, number in keys.items())
    if line_end < 0:  # the last line has no line break
        return len(text), newline + lines
    return line_end + 1, lines + newline


def _into_flow(node: Any, keys: dict[str, int] | dict[str, str]) -> tuple[int, str]:
    """After a flow mapping's last value (before its `}`), or into an empty `{}`."""
    pieces = ", ".join(f"{key}: {number}" for key, number in keys.items())
    if node.value:
        return node.value[-1][1].end_mark.index, ", " + pieces
    return node.end_mark.index - 1, pieces


def same_values(before: Any, after: Any) -> bool:
    """Whether every value of `before` reads the same in `after` (of the same type: 1 is not True)."""
    if isinstance(before, dict):
        return isinstance(after, dict) and all(k in after and same_values(v, after[k]) for k, v in before.items())
    if isinstance(before, list):
        return (isinstance(after, list) and len(before) == len(after)
                and all(same_values(a, b) for a, b in zip(before, after)))
    return type(before) is type(after) and bool(before == after)
