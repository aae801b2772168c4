"""`capture prune`: the retention policy takes bodies and keeps records (SPEC 5.5).

Age first (`prompts.retention_max_days`), then bytes (`prompts.retention_max_bytes`, oldest body first).
A pruned record keeps every field; `text` becomes null and it gains `pruned_at`, `pruned_bytes` and
`pruned_sha256`. No record file is ever deleted. Nothing prunes as a side effect of capture.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from majordomus import ledger
from majordomus.archive import record as rec
from majordomus.archive.scan import Entry, Named, Rewriter, entries, halves, lock_archive, record_names
from majordomus.errors import ContractError, InternalError
from majordomus.identity import now_utc, rfc3339
from majordomus.layout import Layout
from majordomus.policy import load_policy


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
    victims: list[str] = field(default_factory=list)  # record names, oldest first
    refused_files: Named = field(default_factory=Named)  # how many records it refused, the first names and why

    @property
    def refused(self) -> int:
        return self.refused_files.count


@dataclass
class Bodies:
    """What the plan needs of some records (`scan.halves`: one part of them, or all): of each body only its age,
    name and size, never the record."""

    records: int = 0
    refused: Named = field(default_factory=Named)
    body_bytes: int = 0
    bodies: list[tuple[str, str, int]] = field(default_factory=list)  # (age key, name, size)

    def merge(self, part: Bodies) -> None:
        self.records += part.records
        self.refused.merge(part.refused)
        self.body_bytes += part.body_bytes
        self.bodies += part.bodies


def bodies_of(scanned: Iterable[Entry]) -> Bodies:
    found = Bodies()
    for entry in scanned:
        found.records += 1
        if entry.record is None:
            found.refused.add(entry.name, entry.problem)
            continue
        if entry.record.text is not None:
            size = entry.record.body_bytes
            found.bodies.append((age_key(entry), entry.name, size))
            found.body_bytes += size
    return found


def gathered(layout: Layout) -> Bodies:
    """Every record's body, read in two processes at once over a large archive (`scan.halves`)."""
    found = Bodies()
    for part in halves(record_names(layout), lambda names: bodies_of(entries(layout, names))):
        found.merge(part)
    return found


def plan(scanned: Iterable[Entry] | Bodies, limits: Bounds, now: datetime) -> Result:
    """Which bodies go: every one older than the age bound, then the oldest until the rest fit the cap."""
    found = scanned if isinstance(scanned, Bodies) else bodies_of(scanned)
    cutoff = (now - timedelta(days=limits.max_days)).strftime("%Y%m%d%H%M%S")
    result = Result(records=found.records, body_bytes=found.body_bytes, refused_files=found.refused)
    found.bodies.sort()  # oldest first
    keep = result.body_bytes
    for stamp, name, size in found.bodies:
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
        return plan(gathered(layout), limits, moment), limits
    with lock_archive(layout):
        result = plan(gathered(layout), limits, moment)
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
    return line + result.refused_files.refused()
