"""The two renderings of a record (`.md` for a person, `.yaml` for a machine) and `capture render`.

Both are rebuilt from the record, never the other way. Stdlib only: the hook path renders each capture.
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
import time
from pathlib import Path

from majordomus.archive import record as rec
from majordomus.episodes.store import yaml_scalar
from majordomus.errors import RefusedError
from majordomus.layout import PRIVATE_DIR, PRIVATE_FILE, Layout, write_atomic

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from majordomus.cli import Context

# What YAML (1.1, as PyYAML reads it) refuses anywhere in a stream, or reads as a line break (NEL, U+2028,
# U+2029). ASCII text is checked with a small class; the full one (1 ms to compile) only when it is needed.
_ASCII_ODD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_ODD = "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff\ufffe\uffff]"


def _has_odd(text: str) -> bool:
    if text.isascii():
        return _ASCII_ODD.search(text) is not None
    return re.search(_ODD, text) is not None


_BACKTICKS = re.compile("`+")
STALE_TEMP_SECONDS = 600  # a capture's temp file older than this belongs to a process that died


def _is_block_safe(text: str) -> bool:
    """`|-` keeps the text byte for byte only when these hold; otherwise a quoted scalar does."""
    return (bool(text) and not _has_odd(text) and "\r" not in text
            and not text.endswith("\n") and text[0] not in " \n\t")


def tombstone(record: dict[str, Any]) -> str | None:
    """The sentence both renderings show in place of a pruned body."""
    if record.get("text") is not None or "pruned_at" not in record:
        return None
    return (f"(the body was pruned by retention on {record.get('pruned_at')}; it was "
            f"{record.get('pruned_bytes')} byte(s); sha256 {record.get('pruned_sha256')})")


TOMBSTONE_NOTE = "Every other field of this record is unchanged."


def _meta(record: dict[str, Any], stem: str) -> list[str]:
    body = rec.ordered(record)
    lines = [f"{key}: {yaml_scalar(value)}" for key, value in body.items() if key != "text"]
    lines.append(f"record: {yaml_scalar(stem + '.json')}")
    return lines


def render_yaml(record: dict[str, Any], stem: str) -> str:
    lines = _meta(record, stem)
    text = record.get("text")
    if isinstance(text, str) and _is_block_safe(text):
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
    longest = max((len(m.group()) for m in _BACKTICKS.finditer(text)), default=0)
    return "`" * max(3, longest + 1)


def _code(value: Any) -> str:
    """A table cell: an inline code span that survives backticks, pipes and newlines in the value."""
    text = str(value).replace("\n", " ").replace("\r", " ").replace("|", "\\|")
    ticks = "`" * (max((len(m.group()) for m in _BACKTICKS.finditer(text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def _pair(*values: Any) -> str | None:
    shown = [_code(v) for v in values if v not in (None, "")]
    return " · ".join(shown) if shown else None


def render_md(record: dict[str, Any], stem: str) -> str:
    started = str(record.get("started_at") or "")
    when = started.replace("T", " ").replace("Z", " UTC") if started else "unknown time"
    head = record.get("head")
    short = head[:7] if isinstance(head, str) and head != "NONE" else head
    rows = [
        ("Started", _pair(record.get("started_at"))),
        ("Finished", _pair(record.get("finished_at"))),
        ("Provider", _pair(record.get("provider"), record.get("event"))),
        ("Model", _pair(record.get("model"), record.get("effort"))),
        ("Episode", _pair(record.get("episode"), record.get("episode_link"))),
        ("Session", _pair(record.get("session"))),
        ("Prompt", _pair(record.get("id"))),
        ("Source", _pair(record.get("source"))),
        ("Repository", _pair(record.get("repository_id") or record.get("repository"))),
        ("Branch", _pair(record.get("branch"), short)),
        ("Directory", _pair(record.get("cwd"))),
        ("Redacted", _pair(record.get("redacted"))),
        ("Schema", _pair(record.get("schema"))),
        ("Record", _pair(stem + ".json")),
    ]
    lines = ["---", *_meta(record, stem), "---", f"# Prompt — {when}", "", "| | |", "|---|---|"]
    lines.extend(f"| {label} | {value} |" for label, value in rows if value is not None)
    lines += ["", "## PROMPT", ""]
    text = record.get("text")
    sentence = tombstone(record)
    if isinstance(text, str):
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


def write_renderings(directory: Path, stem: str, record: dict[str, Any]) -> None:
    """Both renderings, each atomically and 0600; a symlink under either name is refused."""
    write_atomic(directory / f"{stem}.md", _encode(render_md(record, stem)), PRIVATE_FILE)
    write_atomic(directory / f"{stem}.yaml", _encode(render_yaml(record, stem)), PRIVATE_FILE)


# --- capture render: whole-directory repair -------------------------------------------------------------


def repair_modes(layout: Layout) -> tuple[int, int, list[str]]:
    """Directory 0700, every regular file 0600; symlinks are never followed. (files repaired, stale temps removed, links)."""
    directory = layout.prompts_dir
    if stat.S_IMODE(os.lstat(directory).st_mode) != PRIVATE_DIR:
        os.chmod(directory, PRIVATE_DIR)
    repaired = removed = 0
    links: list[str] = []
    now = time.time()
    with os.scandir(directory) as entries:
        for entry in entries:
            if entry.is_symlink():
                links.append(entry.name)
                continue
            if not entry.is_file(follow_symlinks=False):
                continue
            st = entry.stat(follow_symlinks=False)
            if entry.name.startswith(".") and entry.name.endswith(".tmp") and now - st.st_mtime > STALE_TEMP_SECONDS:
                # a capture killed before its rename: not a record, and it may hold a body
                os.unlink(entry.path)
                removed += 1
                continue
            if stat.S_IMODE(st.st_mode) != PRIVATE_FILE:
                os.chmod(entry.path, PRIVATE_FILE, follow_symlinks=False)
                repaired += 1
    return repaired, removed, links


def render_all(layout: Layout, *, force: bool = False) -> tuple[int, int, list[str]]:
    """(renderings written, failures, refused names): records lacking a rendering, not pretty, or all with force."""
    directory = layout.prompts_dir
    names = set(os.listdir(directory))
    written = failed = 0
    refused: list[str] = []
    for name in sorted(names):
        if not rec.is_record_name(name):
            continue
        stem = name[:-5]
        path = directory / name
        has_both = f"{stem}.md" in names and f"{stem}.yaml" in names
        try:
            raw = rec.read_bytes(path)
        except OSError:
            refused.append(name)
            continue
        pretty = rec.is_pretty(raw)
        if has_both and pretty and not force:
            continue
        try:
            record = rec.parse(raw)
        except rec.RecordError:
            refused.append(name)
            continue
        try:
            if not pretty:  # an older one-line record, every member known and scalar: reformat, re-stamp
                record["schema"] = rec.SCHEMA
                write_atomic(path, rec.dumps(record), PRIVATE_FILE)
            write_renderings(directory, stem, record)
            written += 2
        except RefusedError:  # a symlink under a rendering's name
            refused.append(name)
        except OSError:
            failed += 1
    return written, failed, refused


def command(ctx: Context, argv: list[str]) -> int:
    from majordomus.archive.scan import has_archive, lock_archive
    from majordomus.cli import parser

    p = parser("capture render", "Repair the prompt archive's modes over the whole directory and (re)write "
                                 "missing renderings.")
    p.add_argument("--force", action="store_true", help="rewrite every rendering, not only missing ones")
    args = p.parse_args(argv)
    layout = Layout(ctx.root)
    layout.require()
    rel = str(layout.prompts_dir.relative_to(layout.root))
    if not has_archive(layout):
        _say(ctx, f"no archive in {rel}; nothing to render", {"renderings": 0, "modes": 0})
        return 0
    with lock_archive(layout):
        modes, removed, links = repair_modes(layout)
        written, failed, refused = render_all(layout, force=args.force)
    line = f"{written} rendering(s) written into {rel}"
    if modes:
        line += f"; {modes} file mode(s) set to 600"
    if removed:
        line += f"; {removed} stale temp file(s) of killed captures removed"
    if links:
        line += f"; {len(links)} symbolic link(s) refused, not followed"
    if refused:
        line += f"; {len(refused)} record(s) refused (this writer cannot account for every member)"
    if failed:
        line += f"; {failed} rendering(s) could not be written"
    _say(ctx, line, {"renderings": written, "modes": modes, "stale_temps_removed": removed,
                     "links_refused": len(links), "refused": len(refused), "failed": failed})
    return 13 if failed else 0


def _say(ctx: Context, line: str, data: dict[str, Any]) -> None:
    if ctx.json:
        print(json.dumps({"message": line, **data}))
    else:
        print(line)
    sys.stdout.flush()
