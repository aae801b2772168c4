"""The two renderings of a record (`.md` for a person, `.yaml` for a machine), as pure functions and one writer.

Both are rebuilt from the record, never the other way. Stdlib only: the hook path renders each capture.
"""

from __future__ import annotations

from majordomus.archive import record as rec
from majordomus.layout import PRIVATE_FILE, write_atomic
from majordomus.simple_yaml import ESCAPE_BMP, has_surrogate, yaml_scalar

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any


# What YAML (1.1, as PyYAML reads it) refuses anywhere in a stream, or reads as a line break (NEL, U+2028,
# U+2029): [\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff\ufffe\uffff], as sets and the
# surrogate test (no `re` on the hook path).
_ASCII_ODD = frozenset([*map(chr, range(0x00, 0x09)), "\x0b", "\x0c", *map(chr, range(0x0E, 0x20)), "\x7f"])
_ODD = _ASCII_ODD | ESCAPE_BMP


def _has_odd(text: str) -> bool:
    if text.isascii():
        return not _ASCII_ODD.isdisjoint(text)
    return not _ODD.isdisjoint(text) or has_surrogate(text)


def _longest_backticks(text: str) -> int:
    """The longest run of backticks in the text (what `max(len(m) for m in re.finditer("`+"))` says)."""
    longest = 0
    at = text.find("`")
    while at != -1:
        end = at + 1
        while end < len(text) and text[end] == "`":
            end += 1
        longest = max(longest, end - at)
        at = text.find("`", end)
    return longest


def _is_block_safe(text: str) -> bool:
    """`|-` keeps the text byte for byte only when these hold; otherwise a quoted scalar does."""
    return (bool(text) and not _has_odd(text) and "\r" not in text
            and not text.endswith("\n") and text[0] not in " \n\t")


def tombstone(record: rec.PromptRecord) -> str | None:
    """The sentence both renderings show in place of a pruned body."""
    if record.text is not None or record.pruned_at is None:
        return None
    return (f"(the body was pruned by retention on {record.pruned_at}; it was "
            f"{record.pruned_bytes} byte(s); sha256 {record.pruned_sha256})")


TOMBSTONE_NOTE = "Every other field of this record is unchanged."


def _meta(record: rec.PromptRecord, stem: str) -> list[str]:
    body = record.members()
    lines = [f"{key}: {yaml_scalar(value)}" for key, value in body.items() if key != "text"]
    lines.append(f"record: {yaml_scalar(stem + '.json')}")
    return lines


def render_yaml(record: rec.PromptRecord, stem: str) -> str:
    lines = _meta(record, stem)
    text = record.text
    if text is not None and _is_block_safe(text):
        lines.append("text: |-")
        lines.extend(f"  {line}" if line else "" for line in text.split("\n"))
    else:
        lines.append(f"text: {yaml_scalar(text)}")
        sentence = tombstone(record)
        if sentence:
            lines.append(f"tombstone: {yaml_scalar(sentence + ' ' + TOMBSTONE_NOTE)}")
    return "\n".join(lines) + "\n"


def fence(text: str) -> str:
    """A backtick fence longer than any backtick run inside the text (at least three)."""
    return "`" * max(3, _longest_backticks(text) + 1)


def _code(value: Any) -> str:
    """A table cell: an inline code span that survives backticks, pipes and newlines in the value."""
    text = str(value).replace("\n", " ").replace("\r", " ").replace("|", "\\|")
    ticks = "`" * (_longest_backticks(text) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def _pair(*values: Any) -> str | None:
    shown = [_code(v) for v in values if v not in (None, "")]
    return " · ".join(shown) if shown else None


def render_md(record: rec.PromptRecord, stem: str) -> str:
    started = record.started_at or ""
    when = started.replace("T", " ").replace("Z", " UTC") if started else "unknown time"
    head = record.head
    short = head[:7] if head is not None and head != "NONE" else head
    old = record.legacy_value
    rows = [
        ("Started", _pair(record.started_at)),
        ("Finished", _pair(old("finished_at"))),
        ("Provider", _pair(record.provider, record.event)),
        ("Model", _pair(old("model"), old("effort"))),
        ("Episode", _pair(record.episode, record.episode_link)),
        ("Session", _pair(record.session)),
        ("Prompt", _pair(record.id)),
        ("Source", _pair(record.source)),
        ("Repository", _pair(record.repository_id or old("repository"))),
        ("Branch", _pair(record.branch, short)),
        ("Directory", _pair(record.cwd)),
        ("Redacted", _pair(record.redacted)),
        ("Schema", _pair(record.schema)),
        ("Record", _pair(stem + ".json")),
    ]
    lines = ["---", *_meta(record, stem), "---", f"# Prompt — {when}", "", "| | |", "|---|---|"]
    lines.extend(f"| {label} | {value} |" for label, value in rows if value is not None)
    lines += ["", "## PROMPT", ""]
    text = record.text
    sentence = tombstone(record)
    if text is not None:
        mark = fence(text)
        lines += [mark, text if text.endswith("\n") else text + "\n"]
        lines[-1] += mark
    elif sentence:
        lines += [sentence, "", TOMBSTONE_NOTE]
    else:
        lines.append("(this record has no body)")
    return "\n".join(lines) + "\n"


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "replace")  # a lone surrogate cannot be UTF-8; the record keeps it escaped


def renderings(record: rec.PromptRecord, stem: str) -> dict[str, bytes]:
    """Each rendering's file name and exact bytes: what `write_renderings` writes and doctor compares."""
    return {f"{stem}.md": _encode(render_md(record, stem)), f"{stem}.yaml": _encode(render_yaml(record, stem))}


def write_renderings(directory: Path, stem: str, record: rec.PromptRecord, *, sync: bool = True) -> None:
    """Both renderings, each atomically and 0600; a symlink under either name is refused.

    `sync=False` (the prompt hook) skips their fsyncs: a rendering is rebuilt from its record by
    `majordomus capture render`, and doctor names one that is missing or disagrees."""
    for name, data in renderings(record, stem).items():
        write_atomic(directory / name, data, PRIVATE_FILE, sync=sync)


def disagreeing(directory: Path, stem: str, record: rec.PromptRecord) -> list[str]:
    """The renderings of a record that are missing or say something else than the record (a rewrite killed
    half-way); a symlink counts as disagreeing, and is never followed."""
    out = []
    for name, data in renderings(record, stem).items():
        try:
            current = rec.read_bytes(directory / name)
        except OSError:
            current = None
        if current != data:
            out.append(name)
    return out
