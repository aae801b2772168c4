"""Codex's `config.toml`, edited as text: the stdlib reads TOML but does not write it.

Every edit is checked by parsing the result: it must hold our entries and every key that was there
before, unchanged, or nothing is written.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

from majordomus.errors import InternalError, RefusedError


def _toml_string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)  # a JSON string is a valid TOML basic string


def _is_header(line: str) -> bool:
    return line.lstrip().startswith("[")


def _header_index(lines: list[str], names: tuple[str, ...]) -> int | None:
    """The line of `[a.b]` (bare or quoted keys, spaces allowed), or None."""
    for i, line in enumerate(lines):
        stripped = line.split("#", 1)[0].strip()
        if not (stripped.startswith("[") and not stripped.startswith("[[") and stripped.endswith("]")):
            continue
        parts = [p.strip().strip('"').strip("'") for p in stripped[1:-1].split(".")]
        if tuple(parts) == names:
            return i
    return None


def _drop_key(lines: list[str], table: str, key: str) -> bool:
    """Remove `key = …` from `[table]`, and the table's header when nothing else is left in it."""
    at = _header_index(lines, (table,))
    if at is None:
        return False
    end = next((j for j in range(at + 1, len(lines)) if _is_header(lines[j])), len(lines))
    slot = next((j for j in range(at + 1, end) if lines[j].split("=", 1)[0].strip() == key), None)
    if slot is None:
        return False
    del lines[slot]
    if not any(ln.strip() and not ln.lstrip().startswith("#") for ln in lines[at + 1:end - 1]):
        del lines[at]
        if at > 0 and not lines[at - 1].strip():
            del lines[at - 1]
    return True


def merge_codex_toml(text: str, mcp: Path, rel: str) -> tuple[str, list[str]]:
    try:
        before = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RefusedError(f"{rel} is not valid TOML ({exc}); majordomus refuses to overwrite it",
                           f"fix {rel}, then run capture install again") from None
    lines = text.splitlines()
    changes: list[str] = []
    command_line = f"command = {_toml_string(str(mcp))}"

    servers = before.get("mcp_servers")
    server = servers.get("majordomus") if isinstance(servers, dict) else None
    if server is None:
        lines += ["", "[mcp_servers.majordomus]", command_line]
        changes.append(f"{rel}: added the MCP server majordomus ({mcp})")
    elif not (isinstance(server, dict) and server.get("command") == str(mcp)):
        at = _header_index(lines, ("mcp_servers", "majordomus"))
        if at is None:
            raise RefusedError(f"{rel} defines mcp_servers.majordomus in a form majordomus cannot edit safely",
                               f"set its command to {mcp} by hand")
        end = next((j for j in range(at + 1, len(lines)) if _is_header(lines[j])), len(lines))
        slot = next((j for j in range(at + 1, end) if lines[j].split("=", 1)[0].strip() == "command"), None)
        if slot is None:
            lines.insert(at + 1, command_line)
        else:
            lines[slot] = command_line
        changes.append(f"{rel}: updated the MCP server majordomus ({mcp})")

    features = before.get("features")
    flags = features if isinstance(features, dict) else {}
    if flags.get("hooks") is False or flags.get("codex_hooks") is False:
        changes.append(f"{rel}: note: hooks are switched off in [features]; left as set — "
                       "Codex will not run them")
    elif flags.get("codex_hooks") is True:
        # an earlier install wrote it; Codex 0.171 runs hooks by default and warns on every run about this key
        if not _drop_key(lines, "features", "codex_hooks"):
            changes.append(f"{rel}: note: features.codex_hooks is deprecated (Codex runs hooks by default); "
                           "remove it by hand")
        else:
            changes.append(f"{rel}: removed features.codex_hooks (deprecated: Codex runs hooks by default "
                           "and warns about the key on every run)")

    if not changes or all(c.startswith(f"{rel}: note:") for c in changes):
        return text, changes
    newline = "\r\n" if "\r\n" in text else "\n"  # a CRLF file stays CRLF
    new_text = newline.join(lines) + newline
    if not text.strip():
        new_text = new_text.lstrip()  # a new file starts with its first table, not a blank line
    _check_toml_edit(before, new_text, mcp, rel)
    return new_text, changes


def _check_toml_edit(before: dict[str, Any], new_text: str, mcp: Path, rel: str) -> None:
    """What we wrote must parse, hold our entry, and hold every key that was there before, unchanged."""
    try:
        after = tomllib.loads(new_text)
    except tomllib.TOMLDecodeError as exc:
        raise RefusedError(f"{rel} cannot take the majordomus entries without restructuring it ({exc})",
                           f"add [mcp_servers.majordomus] command = \"{mcp}\" by hand") from None
    ours = {("mcp_servers", "majordomus", "command"), ("features", "codex_hooks")}

    def strip(doc: dict[str, Any]) -> dict[str, Any]:
        copy: dict[str, Any] = json.loads(json.dumps(doc, default=str))
        for path in ours:
            node: Any = copy
            for part in path[:-1]:
                node = node.get(part) if isinstance(node, dict) else None
            if isinstance(node, dict):
                node.pop(path[-1], None)
        for key in ("mcp_servers", "features"):  # tables that exist only because we added to them
            if copy.get(key) == {} or copy.get(key) == {"majordomus": {}}:
                copy.pop(key)
        mcp_servers = copy.get("mcp_servers")
        if isinstance(mcp_servers, dict) and mcp_servers.get("majordomus") == {}:
            mcp_servers.pop("majordomus")
        return copy

    if strip(after) != strip(before) or after.get("mcp_servers", {}).get("majordomus", {}).get("command") != str(mcp):
        raise InternalError(f"editing {rel} would have changed keys that are not majordomus's; nothing written",
                            f"add [mcp_servers.majordomus] command = \"{mcp}\" by hand")


def remove_codex_server(text: str, rel: str) -> tuple[str, bool]:
    """`[mcp_servers.majordomus]` taken out (when its command is majordomus-mcp), with the blank line install put
    before it; every other line as it was. The result is parsed: it must hold every other key, unchanged."""
    try:
        before = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RefusedError(f"{rel} is not valid TOML ({exc}); majordomus refuses to rewrite it",
                           f"fix {rel}, then run capture uninstall again") from None
    servers = before.get("mcp_servers")
    server = servers.get("majordomus") if isinstance(servers, dict) else None
    if not (isinstance(server, dict) and Path(str(server.get("command", ""))).name == "majordomus-mcp"):
        return text, False
    newline = "\r\n" if "\r\n" in text else "\n"
    lines = text.splitlines()
    at = _header_index(lines, ("mcp_servers", "majordomus"))
    if at is None:
        raise RefusedError(f"{rel} defines mcp_servers.majordomus in a form majordomus cannot edit safely",
                           f"remove it from {rel} by hand")
    end = next((j for j in range(at + 1, len(lines)) if _is_header(lines[j])), len(lines))
    start = at - 1 if at > 0 and not lines[at - 1].strip() else at
    kept = lines[:start] + lines[end:]
    new_text = newline.join(kept) + (newline if kept else "")
    after = tomllib.loads(new_text)
    expected: dict[str, Any] = json.loads(json.dumps(before, default=str))
    expected["mcp_servers"].pop("majordomus")
    if not expected["mcp_servers"] and "mcp_servers" not in after:
        expected.pop("mcp_servers")
    if json.loads(json.dumps(after, default=str)) != expected:
        raise RefusedError(f"taking [mcp_servers.majordomus] out of {rel} would change other keys; nothing written",
                           f"remove it from {rel} by hand")
    return new_text, True
