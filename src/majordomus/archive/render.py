"""The two renderings of a record (`.md` for a person, `.yaml` for a machine), as pure functions and one writer.

Both are rebuilt from the record, never the other way. Stdlib only: the hook path renders each capture.
"""

from __future__ import annotations

import _stat as stat  # builtin, as `stat` is not (its S_* functions are these)
import os
import time
from typing import TYPE_CHECKING

from majordomus.archive import record as rec
from majordomus.identity import sha256
from majordomus.layout import PRIVATE_FILE, refuse_symlink, temp_name
from majordomus.simple_yaml import ESCAPE_BMP, has_surrogate, yaml_scalar

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


# The fingerprint a writer leaves in the nanoseconds of each rendering's mtime: a hash of the record's bytes (and of
# this renderer's version) folded into 1 .. 10^9-1. A rendering whose mtime carries its record's fingerprint was
# written whole from exactly those bytes by this renderer, so doctor and render need not read and rebuild it (a
# `stat` rather than a render and a read). Anything else — an edit, a copy, a rewrite killed half-way,
# a renderer of another version, a filesystem without nanoseconds — misses and is compared byte for byte.
# Bump RENDER_VERSION whenever render_md or render_yaml changes what it writes.
RENDER_VERSION = b"majordomus-render-1"
_NS = 1_000_000_000


def fingerprint(record_bytes: bytes, sha: Any = sha256) -> int:
    """What a rendering's `st_mtime_ns % 10**9` is when it was written from a record of these bytes (never 0).

    `sha` is any SHA-256 constructor: the hook's is the builtin module (no OpenSSL to load); the commands that check
    a whole archive pass hashlib's, the same digest 3-4x faster on a record."""
    digest = sha(RENDER_VERSION + b"\0" + record_bytes).digest()
    return int.from_bytes(digest[:8], "big") % (_NS - 1) + 1


def _stamp(fd: int, mark: int, st: os.stat_result | None = None) -> None:
    """Set the file's mtime to this second with `mark` as its nanoseconds (0: no fingerprint); the atime kept, from
    `st` when the caller has the file's stat already."""
    atime = (st or os.fstat(fd)).st_atime_ns
    os.utime(fd, ns=(atime, int(time.time()) * _NS + mark))


def write_rendering(path: Path, data: bytes, mark: int) -> None:
    """One rendering, 0600, carrying the fingerprint `mark`; a symlink under its name is refused (RefusedError).

    A rendering is rebuildable, so it costs no fsync and, when it already exists, no replacing rename (a rename
    over an existing file cost ~1.3 ms here, most of `render --force` and of a prune): it is written in
    place — the old fingerprint cleared first, then the new bytes, then the new fingerprint — so a kill at any
    moment leaves a rendering that is whole, or one that carries no fingerprint (doctor names it, `capture
    render` repairs it), never a byte of the old body:
    - old and new both within the first page: one write of the new bytes padded with newlines over the whole
      old length, then a cut to the new length. A write inside one page is never cut short by a kill, and no
      block is freed: truncating to nothing first freed it, and a freed block costs a discard (120 µs a
      rendering on a disk mounted `discard`, against 13 µs: most of a prune's renderings);
    - else truncated to nothing before the new bytes (a kill leaves it empty or short).
    A new name is created exclusively. A file with another hard link is never written through: it is replaced by
    a temp and a rename, like anything that is not one plain file of ours."""
    refuse_symlink(path)
    flags = os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, PRIVATE_FILE)
        existed = False
    except FileExistsError:
        fd = os.open(path, flags)  # ELOOP if a link took the name since: an OSError, the rendering not written
        existed = True
    try:
        st = os.fstat(fd)
        if existed and (not stat.S_ISREG(st.st_mode) or st.st_nlink != 1):
            os.close(fd)
            fd = -1
            _replace(path, data, mark)
            return
        if st.st_size:
            _stamp(fd, 0, st)
            if not (st.st_size <= _PAGE and len(data) <= _PAGE and _overwrite(fd, data, st.st_size)):
                os.ftruncate(fd, 0)
                os.lseek(fd, 0, os.SEEK_SET)
                _write_all(fd, data)
        else:
            _write_all(fd, data)
        os.fchmod(fd, PRIVATE_FILE)  # whatever the umask was
        _stamp(fd, mark, st)
    finally:
        if fd != -1:
            os.close(fd)


_PAGE = 4096  # the smallest page Linux has: a write within it is never cut short by a kill


def _overwrite(fd: int, data: bytes, old_size: int) -> bool:
    """The new bytes over the old in one write, newlines where the old ran longer, then cut to the new length.
    False when the write came back short (a full disk): the caller starts again from nothing."""
    padded = data + b"\n" * (old_size - len(data))
    if os.write(fd, padded) != len(padded):
        return False
    os.ftruncate(fd, len(data))
    return True


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _replace(path: Path, data: bytes, mark: int) -> None:
    tmp = temp_name(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, PRIVATE_FILE)
    try:
        os.fchmod(fd, PRIVATE_FILE)
        _write_all(fd, data)
        _stamp(fd, mark)
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    os.close(fd)
    os.replace(tmp, path)


def write_renderings(directory: Path, stem: str, record: rec.PromptRecord, *,
                     record_bytes: bytes | None = None) -> None:
    """Both renderings, 0600, each carrying the fingerprint of `record_bytes` (the record's bytes on disk; by
    default what `rec.dumps` writes for it). No fsync: a rendering is rebuilt from its record by
    `majordomus capture render`, and doctor names one that is missing or disagrees (docs/decisions.md)."""
    mark = fingerprint(rec.dumps(record) if record_bytes is None else record_bytes)
    for name, data in renderings(record, stem).items():
        write_rendering(directory / name, data, mark)


def fingerprinted(directory: Path, stem: str, record_bytes: bytes) -> bool:
    """Both renderings are plain files that carry the fingerprint of these record bytes (a stat each, no read)."""
    mark = fingerprint(record_bytes)
    base = os.path.join(directory, stem)
    for suffix in (".md", ".yaml"):
        try:
            st = os.lstat(base + suffix)
        except OSError:
            return False
        if not stat.S_ISREG(st.st_mode) or st.st_mtime_ns % _NS != mark:
            return False
    return True


def disagreeing(directory: Path, stem: str, record: rec.PromptRecord, record_bytes: bytes | None = None) -> list[str]:
    """The renderings of a record that are missing or say something else than the record (a rewrite killed
    half-way); a symlink counts as disagreeing, and is never followed. With the record's bytes, renderings that
    carry their fingerprint are taken as agreeing without being read."""
    if record_bytes is not None and fingerprinted(directory, stem, record_bytes):
        return []
    out = []
    for name, data in renderings(record, stem).items():
        try:
            current = rec.read_bytes(directory / name)
        except OSError:
            current = None
        if current != data:
            out.append(name)
    return out


def refresh(directory: Path, stem: str, record: rec.PromptRecord, record_bytes: bytes) -> int:
    """Make both renderings agree with the record, writing only what differs: a rendering whose bytes are right
    but which lacks the fingerprint gets it (one utime, no write). Returns how many renderings were written."""
    mark = fingerprint(record_bytes)
    written = 0
    for name, data in renderings(record, stem).items():
        path = directory / name
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            fd = -1
        if fd != -1:
            try:
                st = os.fstat(fd)
                same = (stat.S_ISREG(st.st_mode) and st.st_nlink == 1 and st.st_size == len(data)
                        and _read_all(fd) == data)
                if same:
                    if st.st_mtime_ns % _NS != mark:
                        _stamp(fd, mark)  # the bytes and the stamp on one inode: no race with a rename
                    continue
            finally:
                os.close(fd)
        write_rendering(path, data, mark)
        written += 1
    return written


def _read_all(fd: int) -> bytes:
    chunks: list[bytes] = []
    while True:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
