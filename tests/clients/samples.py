"""Which providers a test walks, derived from the providers declaration, and their sample payloads (samples.yaml).

A test that loops over clients asks here ("every provider with a prompt row", "the connection provider") instead
of naming them, so a provider added to providers.yaml is tested by every such test, or fails for want of samples.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import yaml

from majordomus.clients.install import install_gap, is_connection
from majordomus.clients.providers import Provider, load_providers

SAMPLES_PATH = Path(__file__).with_name("samples.yaml")
SAMPLES: dict[str, dict[str, Any]] = yaml.safe_load(SAMPLES_PATH.read_text(encoding="utf-8"))["samples"]
DECLARED: dict[str, Provider] = load_providers()


def _names(keep: Any) -> list[str]:
    return [name for name, p in sorted(DECLARED.items()) if keep(p)]


def has_session_row(p: Provider) -> bool:
    return p.session_row() is not None


def has_prompt_row(p: Provider) -> bool:
    return p.prompt is not None and p.offers.get("prompts") == "hook"


def is_installable(p: Provider) -> bool:
    """capture install writes this client's hook file (its install row is a shape, not `unsupported`)."""
    return not is_connection(p) and install_gap(p) is None


SESSION_PROVIDERS = _names(has_session_row)  # hook and connection episodes alike
HOOK_SESSION_PROVIDERS = _names(lambda p: has_session_row(p) and not is_connection(p))
PROMPT_PROVIDERS = _names(has_prompt_row)
def writes_executables(p: Provider) -> bool:
    """Install writes this client one hook executable per event (Cline), not entries in a hook file."""
    return p.install is not None and p.install.hook_style == "executables"


WIREABLE = _names(is_installable)  # every client capture install wires
INSTALLABLE = _names(lambda p: is_installable(p) and not writes_executables(p))  # the ones wired by a hook file
EXECUTABLE_HOOKS = _names(lambda p: is_installable(p) and writes_executables(p))
UNINSTALLABLE = _names(lambda p: not is_connection(p) and not is_installable(p))
WITHOUT_EPISODES = _names(lambda p: not has_session_row(p))
WITHOUT_PROMPT_ROW = _names(lambda p: p.prompt is None)
(CONNECTION,) = _names(is_connection)  # SPEC 6: the one provider whose episodes are MCP connections


def end_cases(names: list[str]) -> list[tuple[str, str, str]]:
    """(provider, end reason, outcome) for every end each provider's samples list."""
    return [(name, reason, outcome) for name in names for reason, outcome in SAMPLES[name]["ends"].items()]


def first_end(name: str) -> tuple[str, str]:
    """The usual end of this client and the outcome it gives."""
    reason, outcome = next(iter(SAMPLES[name]["ends"].items()))
    return reason, outcome


def session_payload(name: str, event: str, session: str, reason: str | None = None, **extra: Any) -> dict[str, Any]:
    """The sample `start` or `end` payload of this client, for this provider session (and end reason)."""
    return {**_fill(SAMPLES[name][event], session, reason), **extra}


def session_bytes(name: str, event: str, session: str, reason: str | None = None, **extra: Any) -> bytes:
    return json.dumps(session_payload(name, event, session, reason, **extra)).encode()


def _fill(node: Any, session: str, reason: str | None) -> Any:
    if isinstance(node, dict):
        return {k: _fill(v, session, reason) for k, v in node.items() if not (v == "{reason}" and reason is None)}
    if isinstance(node, list):
        return [_fill(v, session, reason) for v in node]
    if node == "{session}":
        return session
    if node == "{reason}":
        return reason
    return copy.deepcopy(node)
