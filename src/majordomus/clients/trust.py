"""Will the client run the hooks here? Read from the client's own trust store, where that store is a readable file.

`capture status` proves majordomus's half with a dry run; this is the client's half. Each reader answers with
the sentence that says what the person must do in the client, or None when the store says the hooks run (or
when there is no store this reader can read). A provider names its reader in its install row (`trust:`).

- Codex (`codex-hooks`): a project's `.codex/` is loaded only when `[projects."<dir>"] trust_level = "trusted"`
  names the project or a folder above it, and each hook runs only when `[hooks.state."<absolute path of
  .codex/hooks.json>:<event>:<group>:<handler>"]` holds a `trusted_hash` (CODEX_HOME/config.toml; REAL-CLIENTS.md,
  0.171.0). The hash is Codex's own digest of the handler, which majordomus does not recompute: a key without a
  hash is untrusted; a key with one is taken as reviewed.
- Gemini CLI (`gemini-folders`): `~/.gemini/trustedFolders.json` maps folders to TRUST_FOLDER, TRUST_PARENT or
  DO_NOT_TRUST, the most specific rule winning; `security.folderTrust.enabled: false` in `~/.gemini/settings.json`
  turns the check off. An untrusted folder runs no project hook (`gemini -p` exits 55).
- Qwen Code (`qwen-folders`): the same rules in `~/.qwen/trustedFolders.json` (or the file
  QWEN_CODE_TRUSTED_FOLDERS_PATH names), but checked only when `security.folderTrust.enabled` is true in
  `~/.qwen/settings.json` (off by default); an untrusted folder runs no project hook, and qwen runs on without them.
- Copilot CLI (`copilot-folders`): `trustedFolders` in `~/.copilot/config.json` lists the folders whose
  repository hooks run.
"""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any

from majordomus.clients.providers import Provider

TRUST_FILE_LIMIT = 4 * 1024 * 1024  # a trust store larger than this is not read (and nothing is claimed)


def _read(path: Path) -> bytes | None:
    try:
        if path.stat().st_size > TRUST_FILE_LIMIT:
            return None
        return path.read_bytes()
    except OSError:
        return None


def _home() -> Path:
    return Path(os.environ.get("HOME") or Path.home())


def _within(folder: str, place: Path) -> bool:
    try:
        base = Path(os.path.realpath(os.path.expanduser(folder)))
    except (OSError, ValueError):
        return False
    return place == base or base in place.parents


def _snake(event: str) -> str:
    """SessionStart -> session_start, as Codex spells an event in a hook's trust key."""
    out = ""
    for i, ch in enumerate(event):
        out += ("_" if i and ch.isupper() else "") + ch.lower()
    return out


def codex_hooks(root: Path, provider: Provider, hooks: dict[str, list[tuple[int, int, str]]]) -> str | None:
    codex_home = Path(os.environ["CODEX_HOME"]) if os.environ.get("CODEX_HOME") else _home() / ".codex"
    config = codex_home / "config.toml"
    raw = _read(config)
    review = ("start codex in this folder and accept \"Hooks need review\" (codex exec skips unreviewed hooks "
              "silently)")
    if raw is None:
        return f"Codex has no {config}, so it has reviewed no hook here: {review}"
    try:
        doc = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None  # not ours to judge; Codex would refuse the file itself
    place = Path(os.path.realpath(root))
    found = doc.get("projects")
    projects: dict[str, Any] = found if isinstance(found, dict) else {}
    trusted = [p for p, v in projects.items() if isinstance(v, dict) and v.get("trust_level") == "trusted"
               and _within(p, place)]
    if not trusted:
        return (f"Codex loads this project's .codex/ only in a trusted project, and {config} trusts no folder "
                f"holding {place}: start codex here and trust the project, then {review}")
    state = (doc.get("hooks") or {}).get("state") if isinstance(doc.get("hooks"), dict) else None
    state = state if isinstance(state, dict) else {}
    file = os.path.realpath(root / (provider.config or ".codex/hooks.json"))
    unreviewed: list[str] = []
    for event, places in hooks.items():
        for group, handler, _command in places:
            entry = state.get(f"{file}:{_snake(event)}:{group}:{handler}")
            if not (isinstance(entry, dict) and entry.get("trusted_hash") and entry.get("enabled", True) is not False):
                unreviewed.append(event)
    if unreviewed:
        return (f"Codex has not reviewed majordomus's hooks {', '.join(dict.fromkeys(unreviewed))} at {file} "
                f"(no trusted_hash under [hooks.state] in {config}): {review}; the trust is per absolute path, so "
                "every clone and worktree needs it")
    return None


def _folder_rule(place: Path, raw: bytes | None) -> str | None:
    """The rule of a Gemini-style trustedFolders.json (folder -> TRUST_FOLDER|TRUST_PARENT|DO_NOT_TRUST) that holds
    `place`, the most specific winning (TRUST_PARENT names the folder's parent); None when none holds it."""
    rules: Any = {}
    if raw is not None:
        try:
            rules = json.loads(raw)
        except ValueError:
            rules = {}
    best: tuple[int, str] | None = None
    for folder, rule in (rules.items() if isinstance(rules, dict) else ()):
        target = str(Path(os.path.expanduser(folder)).parent) if rule == "TRUST_PARENT" else folder
        if isinstance(rule, str) and _within(target, place):
            depth = len(Path(os.path.realpath(os.path.expanduser(target))).parts)
            if best is None or depth > best[0]:
                best = (depth, rule)
    return best[1] if best is not None else None


def _folder_trust_switch(settings: Path) -> object:
    """`security.folderTrust.enabled` in a client's user settings, or None when the file does not say."""
    raw = _read(settings)
    if raw is None:
        return None
    try:
        folder_trust = json.loads(raw).get("security", {}).get("folderTrust", {})
    except (ValueError, AttributeError):
        return None
    return folder_trust.get("enabled") if isinstance(folder_trust, dict) else None


def gemini_folders(root: Path, provider: Provider, hooks: dict[str, list[tuple[int, int, str]]]) -> str | None:
    gemini = _home() / ".gemini"
    if _folder_trust_switch(gemini / "settings.json") is False:
        return None
    place = Path(os.path.realpath(root))
    ask = (f"trust this folder when gemini asks, or add {place} as TRUST_FOLDER to {gemini / 'trustedFolders.json'} "
           "(--skip-trust runs without the project's hooks)")
    rule = _folder_rule(place, _read(gemini / "trustedFolders.json"))
    if rule is None:
        return f"Gemini CLI runs no project hook in a folder it does not trust, and {place} is not trusted: {ask}"
    if rule == "DO_NOT_TRUST":
        return f"Gemini CLI's trustedFolders.json says DO_NOT_TRUST for {place}: {ask}"
    return None


def qwen_folders(root: Path, provider: Provider, hooks: dict[str, list[tuple[int, int, str]]]) -> str | None:
    qwen = _home() / ".qwen"
    if _folder_trust_switch(qwen / "settings.json") is not True:  # Qwen Code's folder trust is off by default
        return None
    place = Path(os.path.realpath(root))
    store = Path(os.environ.get("QWEN_CODE_TRUSTED_FOLDERS_PATH") or qwen / "trustedFolders.json")
    ask = f"trust this folder when qwen asks, or add {place} as TRUST_FOLDER to {store}"
    rule = _folder_rule(place, _read(store))
    if rule is None:
        return (f"Qwen Code's folder trust is on and runs no project hook in a folder it does not trust (qwen runs "
                f"on without them), and {place} is not trusted: {ask}")
    if rule == "DO_NOT_TRUST":
        return f"Qwen Code's trustedFolders.json says DO_NOT_TRUST for {place}: {ask}"
    return None


def copilot_folders(root: Path, provider: Provider, hooks: dict[str, list[tuple[int, int, str]]]) -> str | None:
    config = _home() / ".copilot" / "config.json"
    place = Path(os.path.realpath(root))
    ask = f"trust this folder when copilot asks, or add {place} to trustedFolders in {config}"
    raw = _read(config)
    folders: Any = []
    if raw is not None:
        try:
            folders = json.loads(raw).get("trustedFolders", [])
        except (ValueError, AttributeError):
            return None
    if isinstance(folders, list) and any(isinstance(f, str) and _within(f, place) for f in folders):
        return None
    return f"Copilot CLI runs repository hooks only in a trusted folder, and {place} is not one: {ask}"


READERS = {"codex-hooks": codex_hooks, "gemini-folders": gemini_folders, "copilot-folders": copilot_folders,
           "qwen-folders": qwen_folders}


def untrusted(root: Path, provider: Provider, hooks: dict[str, list[tuple[int, int, str]]]) -> str | None:
    """The sentence that says the client will not run these hooks here, or None. `hooks`: our handlers by client
    event, each as (group index, handler index, command) in the client's hook file."""
    kind = provider.install.trust if provider.install is not None else None
    reader = READERS.get(kind or "")
    return reader(root, provider, hooks) if reader is not None else None
