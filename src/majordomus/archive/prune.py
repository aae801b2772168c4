"""`capture prune`: the retention policy takes bodies and keeps records (SPEC 5.5).

Age first (`prompts.retention_max_days`), then bytes (`prompts.retention_max_bytes`, oldest body first).
A pruned record keeps every field; `text` becomes null and it gains `pruned_at`, `pruned_bytes` and
`pruned_sha256`. No record file is ever deleted. Nothing prunes as a side effect of capture.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from majordomus import ledger
from majordomus.archive import record as rec
from majordomus.archive.scan import Entry, Rewriter, entries, lock_archive
from majordomus.errors import ContractError, InternalError
from majordomus.identity import now_utc, rfc3339
from majordomus.layout import Layout
from majordomus.policy import load_policy
from majordomus.values import replace


@dataclass(frozen=True)
class Bounds:
    max_days: int
    max_bytes: int


def bounds(layout: Layout) -> Bounds:
    """The two bounds; exit 10 naming the file when the policy does not parse or a bound is not a bound."""
    policy = load_policy(layout)
    rel = layout.policy_file.relative_to(layout.root)
    broken = [p for p in policy.problems if p.startswith("prompts")]
    if broken:
        raise ContractError(f"{rel}: {'; '.join(broken)}", "fix it, then run majordomus doctor")
    return Bounds(policy.get_int("prompts.retention_max_days"), policy.get_int("prompts.retention_max_bytes"))


def age_key(entry: Entry) -> str:
    """The capture second a body's age is counted from: the file name's stamp, else its `started_at`."""
    stamp = rec.name_stamp(entry.name)
    if stamp is None and entry.record is not None:
        stamp = "".join(ch for ch in (entry.record.started_at or "") if ch.isdigit())[:14] or None
    return stamp or "99999999999999"  # no time at all: never too old, still counted against the cap


@dataclass
class Result:
    records: int = 0
    body_bytes: int = 0
    pruned: int = 0
    bytes_left: int = 0
    refused: int = 0
    victims: list[str] = field(default_factory=list)  # record names, oldest first


def plan(scanned: Iterable[Entry], limits: Bounds, now: datetime) -> Result:
    """Which bodies go: every one older than the age bound, then the oldest until the rest fit the cap.

    Streams: of each record only its age, name and body size are kept (issue 12), never the record."""
    cutoff = (now - timedelta(days=limits.max_days)).strftime("%Y%m%d%H%M%S")
    result = Result()
    bodies: list[tuple[str, str, int]] = []
    for entry in scanned:
        result.records += 1
        if entry.record is None:
            result.refused += 1
            continue
        size = entry.record.body_bytes
        if entry.record.text is not None:
            bodies.append((age_key(entry), entry.name, size))
            result.body_bytes += size
    bodies.sort()  # oldest first
    keep = result.body_bytes
    for stamp, name, size in bodies:
        if stamp < cutoff or keep > limits.max_bytes:
            result.victims.append(name)
            keep -= size
    result.pruned = len(result.victims)
    result.bytes_left = keep
    return result


def tombstoned(record: rec.PromptRecord, at: str) -> rec.PromptRecord:
    """The record with its body taken: every other field unchanged, the tombstone fields added."""
    body = str(record.text).encode("utf-8", "surrogatepass")
    new = replace(record, text=None, pruned_at=at, pruned_bytes=len(body),
                  pruned_sha256=hashlib.sha256(body).hexdigest())
    return new


def prune(layout: Layout, *, dry_run: bool = False, now: datetime | None = None) -> tuple[Result, Bounds]:
    limits = bounds(layout)
    moment = now or now_utc()
    if dry_run:
        return plan(entries(layout), limits, moment), limits
    with lock_archive(layout):
        result = plan(entries(layout), limits, moment)
        at = rfc3339(moment)
        # the victims read again, one at a time: under the lock no rewriter has changed them since
        rewriter = Rewriter(layout)
        entry = None
        try:
            with rewriter:
                for entry in entries(layout, result.victims):
                    if entry.record is not None and entry.record.text is not None:
                        rewriter.add(entry, tombstoned(entry.record, at))
        except OSError as exc:  # a full disk: each rewrite is atomic, so what is not pruned is still whole
            where = f" while pruning {entry.name}" if entry is not None else ""
            raise InternalError(
                f"prune: {exc.strerror or type(exc).__name__}{where}; {rewriter.done} of "
                f"{result.pruned} body(ies) pruned, the others kept whole",
                "free space on that disk, then run majordomus capture prune again") from exc
    if result.pruned:
        ledger.append(layout, "prompts.pruned", records=result.records, pruned=result.pruned,
                      bytes_left=result.bytes_left, refused=result.refused)
    return result, limits


def sentence(result: Result, limits: Bounds, dry_run: bool) -> str:
    if dry_run:
        line = (f"prune --dry-run: {result.records} record(s), {result.body_bytes} byte(s) of body; "
                f"{result.pruned} would be pruned, leaving {result.bytes_left} byte(s) "
                f"(cap {limits.max_bytes}, {limits.max_days} day(s))")
    else:
        line = (f"prune: {result.records} record(s); {result.pruned} body(ies) pruned, {result.bytes_left} byte(s) "
                f"left of cap {limits.max_bytes}, older than {limits.max_days} day(s) taken")
    if result.refused:
        line += f", {result.refused} refused (this writer cannot account for every member)"
    return line
