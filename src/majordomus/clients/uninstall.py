"""`capture uninstall --provider P`: take out exactly what `capture install` put in, and nothing of a person's.

A file that still holds exactly what install wrote gets its bytes from before back (a file install created is
removed, with the directories it made when they are empty): install then uninstall leaves every file
byte-identical. A file changed since loses only majordomus's own entries — its hook handlers (in any form an
install ever wrote), its `mcpServers.majordomus` or `[mcp_servers.majordomus]`, the keys install added beside
them when the bytes before say they were not there — and keeps everything else as it is. Without a record (an
install older than this), entries are found by their shape, as install finds them. `--dry-run` says what would go.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from majordomus.clients import install_record
from majordomus.clients.install import (
    is_connection,
    json_bytes,
    read_json_config,
    remove_hooks,
    wanted_hooks,
)
from majordomus.clients.install_record import FileRecord, InstallRecord, digest
from majordomus.clients.install_toml import remove_codex_server
from majordomus.clients.links import refuse_links
from majordomus.clients.providers import InstallRow, Provider, get_provider
from majordomus.errors import MissingError
from majordomus.layout import Layout, write_atomic


@dataclass(frozen=True)
class Undo:
    """What uninstall does to one file: its new bytes (None: remove it), and the sentence that says so."""

    rel: str
    data: bytes | None
    mode: int
    line: str
    rmdirs: tuple[str, ...] = ()


def uninstall(root: Path, provider_name: str, *, dry_run: bool = False) -> list[str]:
    provider = get_provider(provider_name)
    if is_connection(provider):
        return [f"{provider.name}: nothing to remove — install writes no file for a connection client; take the "
                "majordomus entry out of your client's MCP configuration"]
    shape = provider.install
    if shape is None or shape.unsupported or not wanted_hooks(provider):
        raise MissingError(f"capture uninstall: install writes nothing for '{provider.name}', so there is nothing to "
                           "remove", "run majordomus capture status to see what is wired")
    layout = Layout(root)
    record = install_record.load(layout, provider.name) if layout.is_initialised() else None
    undos = plan_undo(root, provider, shape, record)
    lines = [_would(u.line) if dry_run else u.line for u in undos]
    if not dry_run:
        for u in undos:
            if u.data is None:
                (root / u.rel).unlink(missing_ok=True)
            else:
                write_atomic(root / u.rel, u.data, mode=u.mode)
        made = {folder for u in undos if u.data is None for folder in u.rmdirs}
        for folder in sorted(made, key=lambda f: f.count("/"), reverse=True):  # the deepest first
            try:
                (root / folder).rmdir()  # only an empty one: whatever a person put there since stays
            except OSError:
                pass
        if record is not None:
            install_record.forget(layout, provider.name)
    if not lines:
        return [f"capture uninstall --provider {provider.name}: nothing of majordomus's is wired for "
                f"{provider.title} here"]
    return lines


def _would(line: str) -> str:
    """The same sentence, said of what a real run would do."""
    for done, would in (("removed ", "would remove "), ("restored ", "would restore ")):
        if done in line:
            return line.replace(done, would).replace("; kept ", "; would keep ")
    return line


def plan_undo(root: Path, provider: Provider, shape: InstallRow, record: InstallRecord | None) -> list[Undo]:
    """Read every file first and decide, write nothing: a refusal of one leaves all of them as they were."""
    if shape.hook_style == "executables":
        return _undo_executables(root, provider, record)
    files = dict.fromkeys(f for f in (*provider.hook_files(), provider.mcp_config) if f)
    for rel in (record.files if record is not None else {}):
        files.setdefault(rel, None)
    exclude = _git_exclude(root) if shape.local_config else None
    if exclude is not None:  # the line install adds there for the per-person file, with a record or without
        files.setdefault(str(exclude.relative_to(root)) if exclude.is_relative_to(root) else str(exclude), None)
    undos: list[Undo] = []
    for rel in files:
        known = record.files.get(rel) if record is not None else None
        found = _undo_file(root, provider, shape, rel, known)
        if found is not None:
            undos.append(found)
    return undos


def _undo_file(root: Path, provider: Provider, shape: InstallRow, rel: str, known: FileRecord | None) -> Undo | None:
    if os.path.isabs(rel) and not _is_git_exclude(root, rel):
        return None  # a record never sends a write outside the repository and its git directory
    path = root / rel
    if not os.path.isabs(rel):
        refuse_links(root, rel)
    try:
        current = path.read_bytes()
        mode = path.stat().st_mode & 0o7777
    except FileNotFoundError:
        return None
    if known is not None and known.before_known and digest(current) == known.written:
        before = known.before_bytes()
        if before is None:
            return Undo(rel, None, mode, f"removed {rel} (install created it)", tuple(known.made_dirs))
        return Undo(rel, before, known.mode or mode, f"restored {rel} as it was before install")
    before_doc = _before_doc(known)
    if rel.endswith("exclude") and "info" in Path(rel).parts:
        return _undo_exclude(rel, current, mode, provider, shape)
    if rel.endswith(".toml"):
        text, removed = remove_codex_server(current.decode("utf-8"), rel)
        if not removed:
            return None
        return _emptied(rel, text.encode("utf-8"), mode, known, f"{rel}: removed the MCP server majordomus")
    doc, raw = read_json_config(root, rel)
    if doc is None or raw is None:
        return None
    said = _remove_from_json(doc, provider, shape, rel, before_doc)
    if not said:
        return None
    return _emptied(rel, json_bytes(doc, raw) if doc else b"{}\n", mode, known, f"{rel}: removed {', '.join(said)}",
                    empty=not doc)


def _emptied(rel: str, data: bytes, mode: int, known: FileRecord | None, line: str, *, empty: bool = False) -> Undo:
    """A file install created and that holds nothing else now goes; any other keeps what is left in it."""
    if (empty or not data.strip()) and known is not None and known.before_known and known.before is None:
        return Undo(rel, None, mode, f"{line}; removed {rel} (install created it, and nothing else is in it)",
                    tuple(known.made_dirs))
    return Undo(rel, data, mode, f"{line}; kept the rest of {rel} as it is")


def _before_doc(known: FileRecord | None) -> dict[str, Any] | None:
    """The file's document before the first install, when the record still knows it (else None)."""
    if known is None or not known.before_known:
        return None
    before = known.before_bytes()
    if before is None:
        return {}
    try:
        found = json.loads(before.decode("utf-8")) if before.strip() else {}
    except (UnicodeDecodeError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def _remove_from_json(doc: dict[str, Any], provider: Provider, shape: InstallRow, rel: str,
                      before: dict[str, Any] | None) -> list[str]:
    said: list[str] = []
    if rel in provider.hook_files():
        events = remove_hooks(doc, provider, shape)
        if events:
            said.append(f"majordomus's hooks {', '.join(events)}")
    if rel == provider.mcp_config:
        servers = doc.get("mcpServers")
        entry = servers.get("majordomus") if isinstance(servers, dict) else None
        if isinstance(servers, dict) and isinstance(entry, dict) and _is_our_server(entry):
            del servers["majordomus"]
            said.append("the MCP server majordomus")
            if not servers and before is not None and "mcpServers" not in before:
                del doc["mcpServers"]
    if said and before is not None:  # keys install added beside its entries, where the file did not have them
        for key in shape.top_extra:
            if key not in before and key in doc and doc[key] == shape.top_extra[key] and set(doc) == {key}:
                del doc[key]
        if shape.switch is not None:
            section, key = shape.switch
            part = doc.get(section)
            had = before.get(section)
            if isinstance(part, dict) and part.get(key) is True and not (isinstance(had, dict) and key in had):
                del part[key]
                said.append(f"{section}.{key}")
                if not part and section not in before:
                    del doc[section]
    return said


def _is_our_server(entry: dict[str, Any]) -> bool:
    command = entry.get("command")
    return isinstance(command, str) and Path(command).name == "majordomus-mcp"


def _git_exclude(root: Path) -> Path | None:
    """git's own exclude file for this worktree (in the common git directory of a linked worktree)."""
    from majordomus.identity import git_argv, run_bounded

    code, out = run_bounded(git_argv(root, "rev-parse", "--path-format=absolute", "--git-path", "info/exclude"), 10.0)
    text = out.decode("utf-8", "replace").strip()
    return Path(text) if code == 0 and text else None


def _is_git_exclude(root: Path, rel: str) -> bool:
    found = _git_exclude(root)
    return found is not None and os.path.realpath(found) == os.path.realpath(rel)


def _undo_exclude(rel: str, current: bytes, mode: int, provider: Provider, shape: InstallRow) -> Undo | None:
    """The line install added to git's exclude file for the per-person file (`/.claude/settings.local.json`)."""
    if not shape.local_config:
        return None
    line = f"/{shape.local_config}\n".encode()
    at = current.rfind(line)
    if at == -1 or (at > 0 and current[at - 1:at] != b"\n"):
        return None
    return Undo(rel, current[:at] + current[at + len(line):], mode,
                f"{rel}: removed the line /{shape.local_config} install added")


def _undo_executables(root: Path, provider: Provider, record: InstallRecord | None) -> list[Undo]:
    """Each hook executable of ours goes (with the folders install made, when empty); a person's own file of the
    same name, or one of ours a person edited since install, stays as it is."""
    from majordomus.clients import install_executables

    rels = dict.fromkeys(install_executables.rel_of(provider, w.client_event) for w in wanted_hooks(provider))
    for rel in (record.files if record is not None else {}):
        rels.setdefault(rel, None)
    undos: list[Undo] = []
    for rel in rels:
        if os.path.isabs(rel):
            continue
        refuse_links(root, rel)
        path = root / rel
        if not path.is_file():
            continue
        current = path.read_bytes()
        mode = path.stat().st_mode & 0o7777
        known = record.files.get(rel) if record is not None else None
        if known is not None and known.before_known and digest(current) == known.written:
            before = known.before_bytes()
            if before is None:
                undos.append(Undo(rel, None, mode, f"removed {rel} (install created it)", tuple(known.made_dirs)))
            else:
                undos.append(Undo(rel, before, known.mode or mode, f"restored {rel} as it was before install"))
        elif install_executables.is_ours(current, provider):
            if known is None and install_executables.command_of(current) is not None and \
                    any(current == install_executables.script(provider, w.tail) for w in wanted_hooks(provider)):
                undos.append(Undo(rel, None, mode, f"removed {rel} (majordomus's hook executable)"))
            else:
                undos.append(Undo(rel, current, mode, f"kept {rel}: it was changed since install, so it is yours "
                                                      "now; delete it by hand if you no longer want it"))
    return undos
