"""The credential table's compiled patterns, kept between hook runs: a prompt holding a credential needs no `re`.

Runs on the hook path: stdlib only. A prompt with a credential in it is the one the prompt hook exists for, and
`import re` costs that hook ~5 ms on Python 3.11 (re imports enum, functools and collections: half again a
prompt hook's own work). What `re.compile` hands the regular expression engine (`_sre`, built into the
interpreter) is a list of numbers; a worktree keeps those lists, per interpreter, in
`.ai/local/state/patterns.<cache tag>-<engine magic>.marshal`, and a hook builds a pattern from them with
`_sre.compile` in microseconds: the same pattern object `re.compile` returns, matching exactly as it does.

- The file is named by the interpreter's cache tag and the engine's magic number: an interpreter of another
  version never reads numbers it would not understand.
- A pattern missing from the file, or a file that is absent, unreadable, a link, too large or damaged, costs
  only the time: the pattern is compiled by `re` as before, and the capture writes the file afresh afterwards
  (`save`, after the prompt's record is written), proving every entry against `re.compile` first.
- It holds pattern code only, never text of a prompt; 0600 like the rest of `state/`, rebuilt whenever lost.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import re
    from collections.abc import Iterable
    from pathlib import Path

    from majordomus.layout import Layout

MAX_BYTES = 4 << 20  # the whole table's code is ~160 KB; a file past this is not ours to parse
_file: str | None = None  # the file `_entries` were read from
_entries: dict[str, bytes] = {}  # pattern source -> its marshalled compile arguments


def file_for(layout: Layout) -> Path | None:
    """This interpreter's file under `state/`; None where an interpreter has no cache tag (it keeps nothing)."""
    import _sre  # type: ignore[import-not-found]  # the engine re compiles for, built in

    tag = sys.implementation.cache_tag
    return None if not tag else layout.state / f"patterns.{tag}-{_sre.MAGIC}.marshal"


def compiled(layout: Layout, source: str) -> re.Pattern[str] | None:
    """The pattern built from the code this worktree keeps, or None (it is then `re`'s to compile, and the
    file's to gain)."""
    global _file, _entries
    path = file_for(layout)
    if path is None:
        return None
    if os.fspath(path) != _file:
        _file, _entries = os.fspath(path), _read(os.fspath(path))
    entry = _entries.get(source)
    if entry is None:
        return None
    try:
        import _sre
        import marshal

        flags, code, groups, groupindex, indexgroup = marshal.loads(entry)
        pattern: re.Pattern[str] = _sre.compile(source, flags, code, groups, groupindex, indexgroup)
        return pattern
    except Exception:  # noqa: BLE001 - damaged numbers: `re` compiles it, and the file is written afresh
        return None


def _read(path: str) -> dict[str, bytes]:
    """The file's entries; empty when it is absent, a link, too large or not what `save` writes."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return {}
    try:
        data = os.read(fd, MAX_BYTES + 1)
    except OSError:
        return {}
    finally:
        os.close(fd)
    if len(data) > MAX_BYTES:
        return {}
    try:
        import marshal

        found = marshal.loads(data)
    except Exception:  # noqa: BLE001 - truncated or foreign bytes
        return {}
    if not isinstance(found, dict) or not all(isinstance(k, str) and isinstance(v, bytes) for k, v in found.items()):
        return {}
    return found


def compile_arguments(source: str) -> tuple[int, list[int], int, dict[str, int], tuple[str | None, ...]]:
    """What `re.compile(source)` hands `_sre.compile` after the source (re._compiler.compile, 3.11 to 3.13)."""
    from re import _compiler, _parser  # type: ignore[attr-defined]

    parsed = _parser.parse(source, 0)
    code = [int(op) for op in _compiler._code(parsed, 0)]  # its opcodes are int subclasses marshal refuses
    groupindex = {str(k): int(v) for k, v in parsed.state.groupdict.items()}
    indexgroup: list[str | None] = [None] * parsed.state.groups
    for name, index in groupindex.items():
        indexgroup[index] = name
    return int(parsed.state.flags), code, parsed.state.groups - 1, groupindex, tuple(indexgroup)


def save(layout: Layout, sources: Iterable[str]) -> int:
    """Write this interpreter's file with every source's compile arguments, each proved to build the pattern
    `re.compile` builds; the number of entries written (0 where this interpreter keeps nothing)."""
    import _sre
    import marshal
    import re

    from majordomus.layout import write_atomic

    path = file_for(layout)
    if path is None:
        return 0
    entries: dict[str, bytes] = {}
    for source in dict.fromkeys(sources):
        try:
            arguments = compile_arguments(source)
            built = _sre.compile(source, *arguments)
        except Exception:  # noqa: BLE001 - an engine whose internals differ: that pattern is left to `re`
            continue
        wanted = re.compile(source)
        if (built.flags, built.groups, built.groupindex) == (wanted.flags, wanted.groups, wanted.groupindex):
            entries[source] = marshal.dumps(arguments)
    write_atomic(path, marshal.dumps(entries), sync=False)  # rebuilt whenever lost: no fsync
    return len(entries)
