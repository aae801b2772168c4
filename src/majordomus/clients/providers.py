"""The providers declaration: offers, evidence, and the adapter rows that read each client's payloads.

The hook path reads `providers.json` (stdlib json); `providers.yaml` beside it is the source a person
edits, and `python -m majordomus.clients.providers --write-json` regenerates the JSON. A test holds them equal.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    
from majordomus.errors import ContractError, MissingError
from majordomus.values import value

HERE = Path(__file__).parent
YAML_PATH = HERE / "providers.yaml"
JSON_PATH = HERE / "providers.json"

OFFER_VALUES: dict[str, tuple[str, ...]] = {
    "episode": ("hooks", "connection", "none"),
    "prompts": ("hook", "none"),  # deliberately no `connection`: an MCP server never sees a prompt
    "compaction": ("hook", "none"),
}


@value
class SessionRow:
    events: dict[str, str]  # start|end|compact -> the client's event name
    session_keys: tuple[str, ...]
    source_keys: tuple[str, ...]
    reason_keys: tuple[str, ...]
    deliberate: frozenset[str]


# A provider whose episode source is `connection` needs no adapter row: its payload is ours.
CONNECTION_ROW = SessionRow(events={}, session_keys=("session_id",), source_keys=("source",),
                            reason_keys=("reason",), deliberate=frozenset({"detach", "shutdown"}))


@value
class PromptRow:
    event: str
    text_keys: tuple[str, ...]
    session_keys: tuple[str, ...]
    id_keys: tuple[str, ...]
    source_keys: tuple[str, ...]
    person_sources: frozenset[str]


@value
class Provider:
    name: str
    title: str
    offers: dict[str, str]
    evidence: dict[str, str]
    config: str | None
    mcp_config: str | None
    timeout_unit: str
    session: SessionRow | None
    prompt: PromptRow | None

    def session_row(self) -> SessionRow | None:
        if self.offers.get("episode") == "connection":
            return CONNECTION_ROW
        return self.session


def _tuple(raw: dict[str, Any], key: str) -> tuple[str, ...]:
    return tuple(str(v) for v in raw.get(key) or ())


def _provider(name: str, raw: dict[str, Any]) -> Provider:
    s = raw.get("session")
    p = raw.get("prompt")
    return Provider(
        name=name,
        title=str(raw.get("title", name)),
        offers={k: str(v) for k, v in (raw.get("offers") or {}).items()},
        evidence={k: str(v) for k, v in (raw.get("evidence") or {}).items()},
        config=raw.get("config"),
        mcp_config=raw.get("mcp_config"),
        timeout_unit=str(raw.get("timeout_unit", "seconds")),
        session=SessionRow(events=dict(s.get("events") or {}), session_keys=_tuple(s, "session_keys"),
                           source_keys=_tuple(s, "source_keys"), reason_keys=_tuple(s, "reason_keys"),
                           deliberate=frozenset(_tuple(s, "deliberate"))) if s else None,
        prompt=PromptRow(event=str(p.get("event", "")), text_keys=_tuple(p, "text_keys"),
                         session_keys=_tuple(p, "session_keys"), id_keys=_tuple(p, "id_keys"),
                         source_keys=_tuple(p, "source_keys"),
                         person_sources=frozenset(_tuple(p, "person_sources"))) if p else None,
    )


_CACHE: dict[str, Provider] | None = None


def load_providers(path: Path = JSON_PATH) -> dict[str, Provider]:
    global _CACHE
    if _CACHE is not None and path == JSON_PATH:
        return _CACHE
    try:
        raw = json.loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise ContractError(f"the providers declaration {path.name} cannot be read: {exc}",
                            "reinstall majordomus") from exc
    table = {name: _provider(name, body) for name, body in raw["providers"].items()}
    if path == JSON_PATH:
        _CACHE = table
    return table


def get_provider(name: str) -> Provider:
    table = load_providers()
    if name not in table:
        raise MissingError(f"unknown provider '{name}' (declared: {', '.join(sorted(table))})",
                           "pass one of those to --provider")
    return table[name]


def problems(raw: dict[str, Any]) -> list[str]:
    """Every way a declaration can be wrong, one sentence each (the evidence rule above all)."""
    found: list[str] = []
    for name, body in (raw.get("providers") or {}).items():
        offers = body.get("offers") or {}
        evidence = body.get("evidence") or {}
        for aspect, allowed in OFFER_VALUES.items():
            value = offers.get(aspect)
            if value not in allowed:
                found.append(f"{name}: offers.{aspect} is {value!r}, not one of {', '.join(allowed)}")
            if len(str(evidence.get(aspect) or "").strip()) < 25:
                found.append(f"{name}: evidence.{aspect} is empty or too short to be evidence")
        if offers.get("episode") == "connection" and body.get("session"):
            found.append(f"{name}: a connection provider's payload keys are fixed; remove its session row")
    return found


def yaml_to_json_text() -> str:
    import yaml

    raw = yaml.safe_load(YAML_PATH.read_text(encoding="utf-8"))
    return json.dumps(raw, indent=1, sort_keys=False) + "\n"


def main(argv: list[str]) -> int:
    if argv == ["--write-json"]:
        JSON_PATH.write_text(yaml_to_json_text(), encoding="utf-8")
        return 0
    if argv[:1] == ["--check"] and len(argv) <= 2:
        import yaml

        source = Path(argv[1]) if len(argv) == 2 else YAML_PATH
        found = problems(yaml.safe_load(source.read_text(encoding="utf-8")))
        for line in found:
            print(f"majordomus: {source.name}: {line}", file=sys.stderr)
        stale = len(argv) == 1 and JSON_PATH.read_text(encoding="utf-8") != yaml_to_json_text()
        if stale:
            print("majordomus: providers.json is stale; run python -m majordomus.clients.providers --write-json", file=sys.stderr)
        return 10 if found or stale else 0
    print("usage: python -m majordomus.clients.providers --write-json | --check [providers.yaml]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
