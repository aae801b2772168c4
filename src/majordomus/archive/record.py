"""The prompt record: its field order, its five `episode_link` words, and how it is read and written.

Stdlib only: the hook path writes records through this module.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any, Literal

    Link = Literal["open", "session-context", "ledger", "orphan", "unlinked-legacy"]

SCHEMA = "majordomus.capture/v1"
LEGACY_SCHEMAS = ("majordomus.prompt/v1",)

# SPEC 5.2, in this order; then the optional members, only when present.
FIELDS = ("schema", "started_at", "provider", "event", "id", "session", "episode", "episode_link",
          "repository_id", "worktree_id", "source", "cwd", "branch", "head", "text")
OPTIONAL = ("redacted", "pruned_at", "pruned_bytes", "pruned_sha256")
# Members an older writer put in records (REFERENCE 8.1). Kept where they are; never written anew.
LEGACY = ("repository", "finished_at", "duration_ms", "model", "effort")
KNOWN = frozenset(FIELDS + OPTIONAL + LEGACY)

LINKED: tuple[Link, ...] = ("open", "session-context", "ledger")
UNLINKED: tuple[Link, ...] = ("orphan", "unlinked-legacy")
LINKS: tuple[Link, ...] = LINKED + UNLINKED

SLUG_MAX = 48
_SLUG_SAFE = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")  # anything else is a separator (no `re` here)
_DIGITS = frozenset("0123456789")
_NAME_SAFE = _SLUG_SAFE | {"-"}


class RecordError(ValueError):
    """A file under a record's name that this writer cannot account for: left untouched, counted as refused."""


def slug(text: str | None, fallback: str | None = None) -> str:
    """`[a-z0-9-]`, at most 48 characters, from the opening of the (already redacted) text.

    Only ASCII letters are lowered: anything else is a separator, so no file name carries a character a
    shell or another filesystem would mangle.
    """
    for candidate in (text, fallback):
        if not candidate:
            continue
        head = candidate[:72].translate(_ASCII_LOWER)
        out: list[str] = []
        for ch in head:  # each run of other characters becomes one `-`
            if ch in _SLUG_SAFE:
                out.append(ch)
            elif not out or out[-1] != "-":
                out.append("-")
        cut = "".join(out).strip("-")[:SLUG_MAX].rstrip("-")
        if cut:
            return cut
    return "prompt"


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


@dataclass(frozen=True)
class PromptRecord:
    """One prompt record (SPEC 5.2). `present` names the members the file has: an older record may lack some,
    and a rewrite never invents what a reader did not find (reconcile's `completed` adds them on purpose)."""

    schema: str
    started_at: str | None = None
    provider: str | None = None
    event: str | None = None
    id: str | None = None
    session: str | None = None
    episode: str | None = None
    episode_link: str | None = None
    repository_id: str | None = None
    worktree_id: str | None = None
    source: str | None = None
    cwd: str | None = None
    branch: str | None = None
    head: str | None = None
    text: str | None = None
    redacted: str | None = None
    pruned_at: str | None = None
    pruned_bytes: int | None = None
    pruned_sha256: str | None = None
    legacy: tuple[tuple[str, Any], ...] = ()  # members an older writer put there, verbatim (REFERENCE 8.1)
    present: frozenset[str] = frozenset(FIELDS)

    @property
    def is_linked(self) -> bool:
        return self.episode_link in LINKED and isinstance(self.episode, str)

    @property
    def body_bytes(self) -> int:
        """What a body weighs against the retention cap: its UTF-8 bytes (0 when pruned or absent)."""
        return 0 if self.text is None else len(self.text.encode("utf-8", "surrogatepass"))

    def legacy_value(self, key: str) -> Any:
        return dict(self.legacy).get(key)

    def completed(self) -> PromptRecord:
        """With every member of the current order present (null where unknown)."""
        return replace(self, present=self.present | frozenset(FIELDS))

    def members(self) -> dict[str, Any]:
        """The record's members in the one order: SPEC fields, a legacy `repository` after `cwd`, then optionals."""
        own = {f.name: getattr(self, f.name) for f in fields(self)}
        legacy = dict(self.legacy)
        out: dict[str, Any] = {}
        for key in FIELDS:
            if key in self.present or own[key] is not None:
                out[key] = own[key]
            if key == "cwd" and "repository" in legacy:
                out["repository"] = legacy["repository"]
        for key in LEGACY:
            if key in legacy and key not in out:
                out[key] = legacy[key]
        for key in OPTIONAL:
            if own[key] is not None:
                out[key] = own[key]
        return out

    @classmethod
    def from_members(cls, members: dict[str, Any]) -> PromptRecord:
        """The record of a parsed JSON object; RecordError for what this writer could not rewrite whole."""
        # the common record, every member a SPEC field or optional one holding a string or null (and an int
        # `pruned_bytes`), built without the keyword constructor's checks: 28 µs a record became ~4;
        # the same value as `_checked` builds (tests/archive/test_rendering_writes.py compares the two)
        for key, item in members.items():
            if key not in _PLAIN or (item is not None
                                     and type(item) is not (int if key == "pruned_bytes" else str)):
                return cls._checked(members)
        if members.get("schema") not in _SCHEMAS:
            return cls._checked(members)
        keys = tuple(members)
        present = _PRESENT.get(keys)
        if present is None:
            present = _PRESENT[keys] = frozenset(k for k in FIELDS if k in members)
        obj = object.__new__(cls)
        own = obj.__dict__
        own.update(_DEFAULTS)
        own.update(members)
        own["present"] = present
        return obj

    @classmethod
    def _checked(cls, members: dict[str, Any]) -> PromptRecord:
        unknown = sorted(k for k in members if k not in KNOWN)
        if unknown:
            raise RecordError(f"has member(s) this writer does not know: {', '.join(unknown[:5])}")
        nested = sorted(k for k, v in members.items() if isinstance(v, (dict, list)))
        if nested:
            raise RecordError(f"has nested member(s): {', '.join(nested[:5])}")
        if members.get("schema") not in (SCHEMA, *LEGACY_SCHEMAS):
            raise RecordError("names no schema this writer knows")
        wrong = sorted(k for k in (*FIELDS, *OPTIONAL) if k != "pruned_bytes" and members.get(k) is not None
                       and not isinstance(members[k], str))
        if wrong or not isinstance(members.get("pruned_bytes", 0), (int, type(None))):
            raise RecordError(f"has a member of the wrong type: {', '.join(wrong[:5]) or 'pruned_bytes'}")
        own = {k: members[k] for k in (*FIELDS, *OPTIONAL) if k in members}
        legacy = tuple((k, members[k]) for k in LEGACY if k in members)
        return cls(**own, legacy=legacy, present=frozenset(k for k in FIELDS if k in members))


_PLAIN = frozenset(FIELDS + OPTIONAL)  # the members `from_members` builds directly
_SCHEMAS = (SCHEMA, *LEGACY_SCHEMAS)
_DEFAULTS: dict[str, Any] = {name: None for name in (*FIELDS, *OPTIONAL)} | {"legacy": (), "present": frozenset()}
_PRESENT: dict[tuple[str, ...], frozenset[str]] = {}  # one frozenset per key order met: few, and shared


def dumps(record: PromptRecord) -> bytes:
    """Pretty JSON, one member per line, the order above: line 1 `{`, line 2 the schema, last line `}`."""
    body = record.members()
    try:
        return (json.dumps(body, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate from a `\ud800` escape: keep it, escaped
        return (json.dumps(body, indent=2, ensure_ascii=True) + "\n").encode("utf-8")


def is_pretty(raw: bytes) -> bool:
    """The shape doctor checks: `{`, then the schema line, …, then `}`."""
    body = raw.rstrip(b"\n")  # the lines `{`, the schema's, …, `}`: the same test as splitting them, without a list
    return body.startswith(_PRETTY_HEAD) and body.endswith(b"\n}")


_PRETTY_HEAD = f'{{\n  "schema": "{SCHEMA}",\n'.encode()


def read_bytes(path: Path | str, dir_fd: int | None = None) -> bytes:
    """A record's bytes; a symlink under a record's name is refused, never followed. With `dir_fd`, `path` is a
    name in that directory (one lookup, not a walk of the whole path)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        return read_fd(fd)
    finally:
        os.close(fd)


def read_fd(fd: int) -> bytes:
    """Everything an open record holds from where it stands."""
    chunk = os.read(fd, 1 << 16)
    if len(chunk) < 1 << 16:  # a regular file reads whole up to its end: no second read for the EOF
        return chunk
    chunks = [chunk]
    while chunk:
        chunk = os.read(fd, 1 << 16)
        chunks.append(chunk)
    return b"".join(chunks)


def parse(raw: bytes) -> PromptRecord:
    """The record, or RecordError when a member is unknown, nested or mistyped.

    (This writer could not rewrite such a record whole.)
    """
    try:
        found = _loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise RecordError("does not parse as JSON") from exc
    if not isinstance(found, dict):
        raise RecordError("is not a JSON object")
    return PromptRecord.from_members(found)


_JSON_SPACE = " \t\n\r"
_SCAN: list[Any] = []


def _loads(raw: bytes) -> Any:
    """`json.loads(raw)`, same answers and same errors, without its encoding detection and whitespace regexes for
    the shape every record has (UTF-8, an object from its first byte): 2.3 us a record instead of 3.5, which
    doctor and render pay 100k times over a large archive."""
    import json  # readers of the archive, not the hook

    if not raw.startswith(b"{") or raw[1:2] == b"\0":
        return json.loads(raw)  # a BOM, leading space, UTF-16/32, not an object: the general path
    if not _SCAN:
        _SCAN.append(json.JSONDecoder().raw_decode)
    text = raw.decode("utf-8", "surrogatepass")  # as json.loads decodes bytes: an encoded surrogate is its error
    found, end = _SCAN[0](text)
    if text[end:].strip(_JSON_SPACE):
        return json.loads(raw)  # trailing data: the general path raises its own error
    return found


def load(path: Path) -> PromptRecord:
    try:
        raw = read_bytes(path)
    except OSError as exc:
        raise RecordError(f"cannot be read ({exc.strerror or type(exc).__name__})") from exc
    return parse(raw)


def name_stamp(name: str) -> str | None:
    """The 14-digit capture second a record's file name starts with (`<14 digits>-<[a-z0-9-]*>.json`)."""
    stamp, slug_ = name[:14], name[15:-len(".json")]
    if (len(name) >= 20 and name[14] == "-" and name.endswith(".json") and _DIGITS.issuperset(stamp)
            and _NAME_SAFE.issuperset(slug_)):
        return stamp
    return None


def is_record_name(name: str) -> bool:
    return name.endswith(".json") and not name.startswith(".")
