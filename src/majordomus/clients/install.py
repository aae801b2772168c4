"""`capture install --provider P`: merges majordomus's hook entries and MCP server entry into a client's own files.

Each client's file shape is its `install` row in the providers declaration, beside its file paths and event
names: this module holds no per-client table. Merging never drops a foreign key or entry, a second run changes
nothing, and a file that does not parse is refused (exit 15), never overwritten.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from majordomus.clients import install_record
from majordomus.clients.hook_command import LAUNCHER, is_ours, local_command, shared_command
from majordomus.clients.install_toml import merge_codex_toml
from majordomus.clients.links import refuse_links
from majordomus.clients.providers import InstallRow, Provider, get_provider, load_providers
from majordomus.errors import MissingError, RefusedError
from majordomus.layout import Layout, write_atomic

CONFIG_DIR_MODE = 0o755
CONFIG_FILE_MODE = 0o644

# What each hook may spend, in seconds, before the client's own unit is applied. SessionEnd is the tight one:
# Claude Code raises its 1.5 s SessionEnd budget to the largest per-hook timeout, so 5 s gives the close room
# without holding a person's exit for long.
TIMEOUT_SECONDS: dict[str, int] = {"start": 10, "end": 5, "compact": 10, "prompt": 10}


# ---------------------------------------------------------------------------------------------------------------
# The executables


def find_executable(name: str) -> Path | None:
    """`majordomus` / `majordomus-mcp`: beside this interpreter (a venv's bin), beside argv[0], then on PATH.

    sys.executable is not resolved: a venv's python is a link to the system one, and its bin is what we want.
    """
    candidates = [Path(sys.executable).parent / name]
    if sys.argv and os.sep in sys.argv[0]:
        candidates.append(Path(sys.argv[0]).absolute().parent / name)
    found = shutil.which(name)
    if found:
        candidates.append(Path(found))
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return path.absolute()
    return None


def _require(name: str) -> Path:
    path = find_executable(name)
    if path is None:
        raise MissingError(f"cannot find the {name} executable beside {sys.executable} or on PATH",
                           "install majordomus as a tool (pipx install majordomus, or uv tool install majordomus) "
                           "so its executables exist")
    return path


# ---------------------------------------------------------------------------------------------------------------
# What a provider wants wired


@dataclass(frozen=True)
class WantedHook:
    client_event: str  # SessionStart, beforeSubmitPrompt, …
    aspect: Literal["session", "prompt"]
    tail: tuple[str, ...]  # the words after the executable that make an entry ours
    timeout_seconds: int


def wanted_hooks(provider: Provider) -> list[WantedHook]:
    out: list[WantedHook] = []
    cap = provider.install.end_cap_seconds if provider.install is not None else None
    if provider.session is not None and provider.offers.get("episode") == "hooks":
        for ours, names in provider.session.events.items():
            seconds = TIMEOUT_SECONDS.get(ours, 10)
            if ours == "end" and cap is not None:
                seconds = min(seconds, cap)
            for theirs in names:  # TaskStart and TaskResume both start: one entry each, the same command
                out.append(WantedHook(theirs, "session", ("capture", "session", "--provider", provider.name,
                                                          "--event", ours), seconds))
    if provider.prompt is not None and provider.offers.get("prompts") == "hook" and provider.prompt.event:
        out.append(WantedHook(provider.prompt.event, "prompt", ("capture", "prompt", "--provider", provider.name),
                              TIMEOUT_SECONDS["prompt"]))
    return out


def install_gap(provider: Provider) -> str | None:
    """Why `capture install` cannot write this provider's hooks, as a sentence; None when its row says how."""
    row = provider.install
    if row is not None and row.unsupported:
        return row.unsupported
    if row is None or row.hook_style is None or not provider.config:
        return "the providers declaration has no install row for it yet"
    return None


def is_connection(provider: Provider) -> bool:
    return provider.offers.get("episode") == "connection"


def timeout_value(provider: Provider, seconds: int) -> int:
    """The client's own unit: Gemini counts milliseconds, everyone else seconds."""
    return seconds * 1000 if provider.timeout_unit == "milliseconds" else seconds


# ---------------------------------------------------------------------------------------------------------------
# Reading a client's JSON (strictly)


class _Duplicate(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:  # json would keep the last silently, dropping a person's entry on rewrite
            raise _Duplicate(key)
        out[key] = value
    return out


def read_json_config(root: Path, rel: str) -> tuple[dict[str, Any] | None, bytes | None]:
    """(document, original bytes); (None, None) when the file does not exist. RefusedError when it cannot be merged."""
    path = root / rel
    refuse_links(root, rel)
    if not path.exists():
        return None, None
    raw = path.read_bytes()
    if not raw.strip():
        return {}, raw
    try:
        doc = json.loads(raw.decode("utf-8"), object_pairs_hook=_no_duplicates)
    except _Duplicate as dup:
        raise RefusedError(f"{rel} names the key '{dup}' twice; majordomus will not rewrite it and lose one",
                           f"remove the duplicate from {rel}, then run capture install again") from None
    except (UnicodeDecodeError, ValueError) as exc:
        where = f" (line {exc.lineno})" if isinstance(exc, json.JSONDecodeError) else ""
        raise RefusedError(f"{rel} is not valid JSON{where}; majordomus refuses to overwrite it",
                           f"fix {rel}, then run capture install again") from None
    if not isinstance(doc, dict):
        raise RefusedError(f"{rel} holds a JSON {type(doc).__name__}, not an object; "
                           "majordomus refuses to overwrite it",
                           f"fix {rel}, then run capture install again")
    return doc, raw


def _section(doc: dict[str, Any], key: str, rel: str) -> dict[str, Any]:
    value = doc.setdefault(key, {})
    if not isinstance(value, dict):
        raise RefusedError(f"{rel}: '{key}' is a {type(value).__name__}, not an object; majordomus will not replace it",
                           f"fix {rel}, then run capture install again")
    return value


def hook_commands(doc: dict[str, Any], shape: InstallRow) -> dict[str, list[str]]:
    """Every hook command per client event, as the client would read the file (for capture status)."""
    out: dict[str, list[str]] = {}
    hooks = doc.get("hooks")
    if not isinstance(hooks, dict):
        return out
    for event, entries in hooks.items():
        if not isinstance(entries, list):
            continue
        for handler in _handlers(entries, shape):
            command = handler.get(shape.command_key)
            if isinstance(command, str):
                out.setdefault(event, []).append(command)
    return out


def our_places(doc: dict[str, Any], provider: Provider, shape: InstallRow) -> dict[str, list[tuple[int, int, str]]]:
    """Where majordomus's handlers sit in a hook file: client event -> [(group index, handler index, command)]."""
    out: dict[str, list[tuple[int, int, str]]] = {}
    hooks = doc.get("hooks")
    if not isinstance(hooks, dict):
        return out
    for want in wanted_hooks(provider):
        entries = hooks.get(want.client_event)
        for gi, entry in enumerate(entries if isinstance(entries, list) else []):
            group = [entry] if shape.hook_style == "flat" else (entry.get("hooks") if isinstance(entry, dict) else [])
            for hi, handler in enumerate(group if isinstance(group, list) else []):
                command = handler.get(shape.command_key) if isinstance(handler, dict) else None
                if isinstance(command, str) and is_ours(command, want.tail):
                    out.setdefault(want.client_event, []).append((gi, hi, command))
    return out


def _handlers(entries: list[Any], shape: InstallRow) -> list[dict[str, Any]]:
    if shape.hook_style == "flat":
        return [h for h in entries if isinstance(h, dict)]
    found: list[dict[str, Any]] = []
    for group in entries:
        if isinstance(group, dict) and isinstance(group.get("hooks"), list):
            found.extend(h for h in group["hooks"] if isinstance(h, dict))
    return found


# ---------------------------------------------------------------------------------------------------------------
# Merging


def merge_hooks(doc: dict[str, Any], provider: Provider, shape: InstallRow, launcher: Path | None,
                rel: str) -> list[str]:
    """Add or update our handler for each wanted event; every other handler stays where it is. With `launcher`
    (a per-person file) the handlers name this machine's launcher by path, else (a shared file) by name."""
    changes: list[str] = []
    for key, value in shape.top_extra.items():
        if key not in doc:
            doc[key] = value
    hooks = _section(doc, "hooks", rel)
    added: list[str] = []
    updated: list[str] = []
    for want in wanted_hooks(provider):
        command = local_command(launcher, want.tail) if launcher is not None else shared_command(want.tail)
        handler = {**shape.handler_extra, shape.command_key: command,
                   shape.timeout_key: timeout_value(provider, want.timeout_seconds)}
        entries = hooks.setdefault(want.client_event, [])
        if not isinstance(entries, list):
            raise RefusedError(f"{rel}: hooks.{want.client_event} is not a list; majordomus will not replace it",
                               f"fix {rel}, then run capture install again")
        mine = [h for h in _handlers(entries, shape) if is_ours(h.get(shape.command_key), want.tail)]
        if not mine:
            entries.append(handler if shape.hook_style == "flat" else {"hooks": [handler]})
            added.append(want.client_event)
        elif any(_covers(h, handler) for h in mine):
            continue
        else:
            mine[0].update(handler)  # our own entry, out of date (a moved launcher, a new timeout, an older form)
            updated.append(want.client_event)
    unit = "ms" if provider.timeout_unit == "milliseconds" else "s"
    if added:
        changes.append(f"{rel}: added hooks {', '.join(added)} (timeouts in {unit}: {shape.timeout_key})")
    if updated:
        changes.append(f"{rel}: updated majordomus's hooks {', '.join(updated)}")
    if shape.switch is not None:
        section_name, key = shape.switch
        section = _section(doc, section_name, rel)
        if key not in section:
            section[key] = True
            changes.append(f"{rel}: set {section_name}.{key} to true (the client runs no hooks without it)")
        elif section[key] is not True:  # a person's explicit choice: say so, never flip it
            changes.append(f"{rel}: note: {section_name}.{key} is {json.dumps(section[key])}; left as set — "
                           "the client will not run these hooks")
    return changes


def _covers(existing: dict[str, Any], wanted: dict[str, Any]) -> bool:
    return all(existing.get(k) == v for k, v in wanted.items())


def merge_mcp_json(doc: dict[str, Any], shape: InstallRow, mcp: Path, rel: str) -> list[str]:
    servers = _section(doc, "mcpServers", rel)
    wanted = {**shape.mcp_extra, "command": str(mcp), "args": []}
    current = servers.get("majordomus")
    if isinstance(current, dict) and _covers(current, wanted):
        return []
    if current is not None and not isinstance(current, dict):
        raise RefusedError(f"{rel}: mcpServers.majordomus is not an object; majordomus will not replace it",
                           f"fix {rel}, then run capture install again")
    servers["majordomus"] = {**(current or {}), **wanted}  # keys a person added (env, …) stay
    verb = "updated" if current else "added"
    return [f"{rel}: {verb} the MCP server majordomus ({mcp})"]


def json_bytes(doc: dict[str, Any], original: bytes | None) -> bytes:
    """Pretty JSON in the file's own indentation (2 when new), one trailing newline."""
    indent: int | str = 2
    if original:
        for line in original.decode("utf-8", "replace").splitlines()[1:]:
            lead = line[: len(line) - len(line.lstrip())]
            if lead:
                indent = lead if "\t" in lead else len(lead)
                break
    return (json.dumps(doc, indent=indent, ensure_ascii=False) + "\n").encode("utf-8")


# ---------------------------------------------------------------------------------------------------------------
# The command


@dataclass
class PlannedWrite:
    rel: str
    data: bytes
    mode: int
    recorded: bool = True  # false for a file install only took an earlier install's entries out of


def plan(root: Path, provider: Provider, exe: Path, mcp: Path) -> tuple[list[PlannedWrite], list[str]]:
    """Read and merge every file first, write nothing: a refusal of one file leaves all of them as they were.

    A file teammates get through git names the executables by name (a command that works on every clone where
    majordomus is on PATH); only the client's per-person file names this machine's path (SPEC §7).
    """
    shape = provider.install
    assert shape is not None  # install() admits only providers with an install shape
    if shape.hook_style == "executables":
        from majordomus.clients import install_executables

        wanted = [(w.client_event, w.tail) for w in wanted_hooks(provider)]
        scripts, lines = install_executables.plan(root, provider, wanted)
        return [PlannedWrite(rel, data, install_executables.SCRIPT_MODE) for rel, data in scripts], lines
    docs: dict[str, tuple[dict[str, Any], bytes | None, dict[str, Any]]] = {}
    changes: list[str] = []

    def doc_of(rel: str) -> dict[str, Any]:
        if rel not in docs:
            doc, raw = read_json_config(root, rel)
            doc = {} if doc is None else doc
            docs[rel] = (doc, raw, json.loads(json.dumps(doc)))  # a deep copy: what the file said before
        return docs[rel][0]

    hooks_rel = provider.hooks_file()
    if hooks_rel:
        local = hooks_rel == shape.local_config
        changes += merge_hooks(doc_of(hooks_rel), provider, shape, exe if local else None, hooks_rel)
        if local and provider.config and (root / provider.config).exists():
            changes += drop_hooks(doc_of(provider.config), provider, shape, provider.config, hooks_rel)
    writes: list[PlannedWrite] = []
    shared_mcp = Path(mcp.name)
    if provider.mcp_config and shape.mcp_style == "json":
        changes += merge_mcp_json(doc_of(provider.mcp_config), shape, shared_mcp, provider.mcp_config)
    elif provider.mcp_config:
        rel = provider.mcp_config
        refuse_links(root, rel)
        path = root / rel
        try:
            original = path.read_bytes().decode("utf-8") if path.exists() else ""  # bytes: keep CRLF as it is
        except UnicodeDecodeError:
            raise RefusedError(f"{rel} is not UTF-8 text; majordomus refuses to overwrite it",
                               f"fix {rel}, then run capture install again") from None
        new_text, toml_changes = merge_codex_toml(original, shared_mcp, rel)
        changes += toml_changes
        if new_text != original:
            writes.append(PlannedWrite(rel, new_text.encode("utf-8"), _mode_for(path)))
    moved_out = provider.config if hooks_rel and hooks_rel == shape.local_config else None
    for rel, (doc, raw, before) in docs.items():
        if raw is None or doc != before:
            writes.append(PlannedWrite(rel, json_bytes(doc, raw), _mode_for(root / rel), recorded=rel != moved_out))
    return writes, changes


def remove_hooks(doc: dict[str, Any], provider: Provider, shape: InstallRow) -> list[str]:
    """Take majordomus's own handlers out of a hook file's document, with any group, event list or `hooks`
    object that held nothing else; every other entry stays where it is. The client events it took them from."""
    hooks = doc.get("hooks")
    if not isinstance(hooks, dict):
        return []
    dropped: list[str] = []
    for event in dict.fromkeys(w.client_event for w in wanted_hooks(provider)):
        tails = [w.tail for w in wanted_hooks(provider) if w.client_event == event]

        def ours(handler: object, tails: list[tuple[str, ...]] = tails) -> bool:
            return isinstance(handler, dict) and any(is_ours(handler.get(shape.command_key), t) for t in tails)

        entries = hooks.get(event)
        if not isinstance(entries, list):
            continue
        kept: list[Any] = []
        changed = False
        for entry in entries:
            if shape.hook_style == "flat":
                if ours(entry):
                    changed = True
                    continue
            elif isinstance(entry, dict) and isinstance(entry.get("hooks"), list):
                inner = [h for h in entry["hooks"] if not ours(h)]
                if len(inner) != len(entry["hooks"]):
                    changed = True
                    if not inner and set(entry) <= {"hooks", "matcher"}:
                        continue  # the group held only our handler
                    entry = {**entry, "hooks": inner}
            kept.append(entry)
        if changed:
            dropped.append(event)
            if kept:
                hooks[event] = kept
            else:
                del hooks[event]
    if dropped and not hooks:
        del doc["hooks"]
    return dropped


def drop_hooks(doc: dict[str, Any], provider: Provider, shape: InstallRow, rel: str, moved_to: str) -> list[str]:
    """Take majordomus's own handlers out of a tracked file (an earlier install put them there); keep the rest."""
    dropped = remove_hooks(doc, provider, shape)
    if not dropped:
        return []
    return [f"{rel}: removed majordomus's hooks {', '.join(dropped)} (a tracked file; they now live in {moved_to})"]


def sharing_lines(provider: Provider, exe: Path) -> list[str]:
    """What each written file means for the team, and whether this machine's clients will find the commands."""
    shape = provider.install
    assert shape is not None
    hooks_tracked = None if shape.local_config else provider.config
    if shape.hook_style == "executables" and provider.config:
        hooks_tracked = f"{provider.config.rstrip('/')}/ (its hook executables)"
    tracked = [f for f in dict.fromkeys((hooks_tracked, provider.mcp_config)) if f]
    lines: list[str] = []
    if tracked:
        verb = "names" if len(tracked) == 1 else "name"
        lines.append(f"shared: {', '.join(tracked)} {verb} majordomus by name, never a path of this machine, so they "
                     "work on every clone where majordomus is on PATH; where it is not (or is broken), each hook "
                     "does nothing and the client runs as if it were not wired")
    if shape.local_config:
        lines.append(f"yours: {shape.local_config} is {provider.title}'s per-person file, kept out of git; it names "
                     f"{exe}")
    teammate = "each teammate installs majordomus so it is on PATH (pipx install majordomus, or its virtualenv active)"
    if shape.local_config:
        teammate += f" and runs `majordomus capture install --provider {provider.name}` once after cloning"
    lines.append(f"teammates: {teammate}")
    on_path = shutil.which(exe.name)
    if on_path is None:
        lines.append(f"note: {exe.name} is not on PATH here, so {provider.title} will not find the command the shared "
                     f"files name: start it with {exe.parent} on PATH (activate the virtualenv), or install majordomus "
                     "with pipx")
    elif Path(on_path).absolute() != exe:
        lines.append(f"note: {exe.name} on PATH here is {on_path}, not this installation ({exe}); the clients will run "
                     "that one")
    return lines


def ensure_ignored(root: Path, rel: str, record: install_record.InstallRecord | None = None) -> list[str]:
    """A per-person file must stay out of git: add it to the repository's own exclude file when nothing ignores it."""
    try:
        check = subprocess.run(["git", "--no-optional-locks", "-C", str(root), "check-ignore", "-q", "--", rel],
                               capture_output=True, timeout=5)
        if check.returncode != 1:  # 0: ignored already; 128: not a git repository (nothing to add to)
            return []
        where = subprocess.run(["git", "--no-optional-locks", "-C", str(root), "rev-parse", "--git-path",
                                "info/exclude"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return [f"note: could not ask git whether {rel} is ignored; keep it out of commits (it names this machine's "
                "paths)"]
    if where.returncode != 0 or not where.stdout.strip():
        return []
    exclude = Path(where.stdout.strip())
    exclude = exclude if exclude.is_absolute() else root / exclude
    if exclude.is_symlink():
        return [f"note: {exclude} is a symbolic link; add {rel} to it by hand"]
    before, mode = _current(exclude)
    line = f"/{rel}\n".encode()
    exclude.parent.mkdir(parents=True, exist_ok=True)
    after = (before or b"") + (b"" if not before or before.endswith(b"\n") else b"\n") + line
    write_atomic(exclude, after, mode=mode or 0o644)
    shown = exclude.relative_to(root) if exclude.is_relative_to(root) else exclude
    if record is not None:  # by its path in the worktree, or (a linked worktree's) in the common git directory
        record.note(str(shown), before, mode, [], after)
    return [f"{rel}: added to git's exclude file ({shown}), so it is never committed"]


def _mode_for(path: Path) -> int:
    """A new file is 0644; an existing one keeps its mode, minus group and world write."""
    try:
        return stat.S_IMODE(path.stat().st_mode) & 0o755 & ~0o111 or CONFIG_FILE_MODE
    except FileNotFoundError:
        return CONFIG_FILE_MODE


def _ensure_parent(root: Path, rel: str) -> list[str]:
    """Create missing directories 0755 whatever the umask (a umask of 000 must not leave them world-writable);
    the ones it made, outermost first, relative to the worktree."""
    path = root
    made: list[str] = []
    for part in Path(rel).parts[:-1]:
        path = path / part
        if not path.exists():
            path.mkdir()
            os.chmod(path, CONFIG_DIR_MODE)
            made.append(str(path.relative_to(root)))
    return made


def _current(path: Path) -> tuple[bytes | None, int | None]:
    """A file's bytes and mode before install writes it; (None, None) when there is none."""
    try:
        return path.read_bytes(), stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        return None, None


def install(root: Path, provider_name: str) -> list[str]:
    """Wire one client; the lines say what changed (or that nothing had to)."""
    provider = get_provider(provider_name)
    if is_connection(provider):
        mcp = _require("majordomus-mcp")
        return [f"{provider.name}: nothing to write — any MCP client wires majordomus by starting {mcp} over stdio,",
                f"  e.g. {{\"mcpServers\": {{\"majordomus\": {{\"type\": \"stdio\", \"command\": \"{mcp}\"}}}}}},",
                "  then calling majordomus_session_attach with its own durable external_id"]
    gap = install_gap(provider) if wanted_hooks(provider) else "it declares no hook events to wire"
    if gap is not None:
        table = load_providers()
        wireable = sorted(n for n, p in table.items() if not is_connection(p) and wanted_hooks(p)
                          and install_gap(p) is None)
        wireable += sorted(n for n, p in table.items() if is_connection(p))
        raise MissingError(f"capture install: majordomus knows no hook wiring for '{provider.name}' "
                           f"(episode: {provider.offers.get('episode')}, prompts: {provider.offers.get('prompts')}, "
                           f"adapter rows: {'yes' if provider.session or provider.prompt else 'none'}): "
                           f"{gap.rstrip('.')}",
                           f"wire one of: {', '.join(wireable)}")
    exe, mcp = _require(LAUNCHER), _require("majordomus-mcp")
    writes, changes = plan(root, provider, exe, mcp)
    local = provider.install.local_config if provider.install is not None else None
    # said on every run, written or not: the client's own consent is not a file majordomus can write
    approve = [f"approve in {provider.title}: {line}" for line in
               (provider.install.approve if provider.install is not None else ())]
    layout = Layout(root)
    record = (install_record.load(layout, provider.name) or install_record.InstallRecord(provider.name)
              if layout.is_initialised() else None)
    for w in writes:
        before, mode = _current(root / w.rel)
        made = _ensure_parent(root, w.rel)
        write_atomic(root / w.rel, w.data, mode=w.mode)
        if record is not None and w.recorded:
            record.note(w.rel, before, mode, made, w.data)
    if local and (root / local).exists():
        changes += ensure_ignored(root, local, record)
    if record is not None and record.files:
        install_record.save(layout, record)  # what uninstall takes out again
    sharing = sharing_lines(provider, exe)
    if not writes:
        if provider.install is not None and provider.install.hook_style == "executables":
            return [*changes, f"capture install --provider {provider.name}: nothing to change; {provider.config} "
                              "already holds majordomus's hook executables", *sharing, *approve]
        files = ", ".join(dict.fromkeys(f for f in (local, provider.config, provider.mcp_config)
                                        if f and (root / f).exists()))
        return [*changes, f"capture install --provider {provider.name}: nothing to change; "
                          f"{files} already wire majordomus", *sharing, *approve]
    return changes + list(provider.install.notes if provider.install is not None else ()) + sharing + approve
