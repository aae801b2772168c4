"""policy.yaml: the defaults `init` writes, the reader, and a sentence per broken key.

PyYAML is imported inside the reader only. The hook path reads a JSON cache of the parsed policy
keyed by the file's size and mtime, so a prompt never pays for a YAML parser.
"""

from __future__ import annotations

import json
from pathlib import Path

from majordomus.errors import ContractError
from majordomus.layout import Layout, write_atomic
from majordomus.values import value

TYPE_CHECKING = False
if TYPE_CHECKING:
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


@value
class Policy:
    values: dict[str, int]
    declared: frozenset[str] = frozenset()
    problems: tuple[str, ...] = ()

    def get_int(self, key: str) -> int:
        return self.values.get(key, DEFAULTS[key])


def _shown(value: int) -> str:
    """A number as written, or its size when it is too long to print (str() of a huge int can fail)."""
    return f"{value:,}" if value < 10**30 else "a number of more than 30 digits"


def _validate(raw: Any, source: Path) -> Policy:
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
    return Policy(values=values, declared=frozenset(declared), problems=tuple(problems))


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
    return _validate(raw, path)


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
        cached = json.loads(layout.policy_cache.read_bytes())
        if cached.get("stamp") == stamp and isinstance(cached.get("values"), dict):
            return {**DEFAULTS, **cached["values"]}
    except (OSError, ValueError):
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


def missing_keys(layout: Layout) -> dict[str, int]:
    """Keys `update` may add: absent from the file (never a value the person wrote)."""
    policy = load_policy(layout)
    return {k: v for k, v in DEFAULTS.items() if k not in policy.declared}
