"""The providers declaration: offers, evidence, and the adapter rows that read each client's payloads.

The hook path reads `providers.json` (stdlib json); `providers.yaml` beside it is the source a person
edits, and `python -m majordomus.clients.providers --write-json` regenerates the JSON. A test holds them equal.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from majordomus.errors import ContractError, MissingError

if TYPE_CHECKING:
    from typing import Any, Literal

    HookStyle = Literal["nested", "flat", "executables"]
    McpStyle = Literal["json", "codex-toml"]

HERE = Path(__file__).parent
YAML_PATH = HERE / "providers.yaml"
JSON_PATH = HERE / "providers.json"

OFFER_VALUES: dict[str, tuple[str, ...]] = {
    "episode": ("hooks", "connection", "none"),
    "prompts": ("hook", "none"),  # deliberately no `connection`: an MCP server never sees a prompt
    "compaction": ("hook", "none"),
}


SESSION_EVENTS = ("start", "end", "compact", "turn")
HOOK_STYLES = ("nested", "flat", "executables")  # nested: event -> [{matcher?, hooks: [handler]}];
# flat: event -> [handler]; executables: one script per event, named after it, in the `config` folder
MCP_STYLES = ("json", "codex-toml")  # json: mcpServers.majordomus; codex-toml: [mcp_servers.majordomus]
INSTALL_KEYS = frozenset({"hook_style", "command_key", "timeout_key", "handler_extra", "top_extra",
                          "end_cap_seconds", "mcp_style", "mcp_extra", "switch", "notes", "approve",
                          "local_config", "trust", "unsupported"})


@dataclass(frozen=True)
class SessionRow:
    events: dict[str, tuple[str, ...]]  # start|end|compact -> the client's event names (one or more)
    session_keys: tuple[str, ...]
    source_keys: tuple[str, ...]
    reason_keys: tuple[str, ...]
    deliberate: frozenset[str]
    # a turn event whose payload says how the turn ended (Cursor's stop `status`) completes only with these
    turn_status_keys: tuple[str, ...] = ()
    turn_completed: frozenset[str] = frozenset()


# A provider whose episode source is `connection` needs no adapter row: its payload is ours.
CONNECTION_ROW = SessionRow(events={}, session_keys=("session_id",), source_keys=("source",),
                            reason_keys=("reason",), deliberate=frozenset({"detach", "shutdown"}))


@dataclass(frozen=True)
class PromptRow:
    event: str
    text_keys: tuple[str, ...]
    session_keys: tuple[str, ...]
    id_keys: tuple[str, ...]
    source_keys: tuple[str, ...]
    person_sources: frozenset[str]
    start_races: bool = False  # the client starts this hook and its SessionStart at the same moment


@dataclass(frozen=True)
class InstallRow:
    """How `capture install` spells this client's hook and MCP entries; `unsupported` says why it cannot.

    Read by install and status only; a value (not a dataclass) because a hook still builds its own provider,
    this row included.
    """

    hook_style: HookStyle | None  # None when install is unsupported
    command_key: str
    timeout_key: str
    handler_extra: dict[str, Any]  # keys every handler carries beside the command and timeout
    top_extra: dict[str, Any]  # keys the hook file needs beside "hooks" (written only when absent)
    end_cap_seconds: int | None  # a client that will not wait longer for its end hook
    mcp_style: McpStyle
    mcp_extra: dict[str, Any]  # keys the MCP server entry carries beside command and args
    switch: tuple[str, str] | None  # a section.key the client needs true before it runs hooks
    notes: tuple[str, ...]  # lines install prints after it wrote something
    approve: tuple[str, ...]  # what the person must approve in the client before it runs the wiring
    # the client's per-person settings file, kept out of git: the hooks go there, naming this machine's executable
    local_config: str | None
    trust: str | None  # the reader of the client's own trust store (clients/trust.py), where it is a readable file
    unsupported: str | None  # the sentence that says why majordomus cannot write this client's hooks


@dataclass(frozen=True)
class ResumeRow:
    """The client's own command that resumes one of its sessions (`{session}` stands for the provider session)."""

    command: str
    evidence: str

    def line(self, session: str) -> str:
        import shlex

        return self.command.replace("{session}", shlex.quote(session))


@dataclass(frozen=True)
class McpClientRow:
    """The names a client gives itself in an MCP `initialize` (`clientInfo.name`): how an attach from a client
    whose hooks record its episodes is recognised when no open episode names its process."""

    names: tuple[str, ...]
    evidence: str


@dataclass(frozen=True)
class StateFileRow:
    """A client's own record of one of its sessions, read where its hooks say too little (Cline): the task's first
    message when its start hook runs, and whether the session ended in order once its process is gone.

    `paths` are tried in order: `$VAR/…` only while VAR is set, `~/…` under HOME; `{session}` is the provider
    session. Only the keys a row names are read."""

    paths: tuple[str, ...]
    prompt_key: str | None  # the task's first message, on disk before the start hook runs
    prompt_event: str  # the client's event the record names for it
    prompt_sources: frozenset[str]  # the start's source (the session row's source keys) that is a new task's
    prompt_tag: str | None  # a tag the client wraps a typed message in (`<user_input mode="act">…</user_input>`)
    messages_key: str | None  # the file of the session's messages: the prompt is this task's only while it is empty
    dispatched_key: str | None  # the start payload's time (its run may have ended before the hook read the file)
    status_key: str | None
    orderly: frozenset[str]  # the statuses the client writes only when it ended the session itself
    exit_code_key: str | None  # when named, the exit code must be 0
    ended_key: str | None  # when the client ended it (ISO 8601, UTC)
    pid_key: str | None  # the process the file names: it must be the episode's client
    evidence: str


@dataclass(frozen=True)
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
    install: InstallRow | None
    resume: ResumeRow | None = None
    mcp_client: McpClientRow | None = None
    state_file: StateFileRow | None = None

    def hooks_file(self) -> str | None:
        """Where install writes the hooks: the client's per-person file when it has one kept out of git, else
        its (tracked) config."""
        return (self.install.local_config if self.install is not None else None) or self.config

    def hook_files(self) -> tuple[str, ...]:
        """Every file the client reads our hooks from: its per-person one, then its shared one (an older
        install's)."""
        return tuple(dict.fromkeys(f for f in (self.hooks_file(), self.config) if f))

    def session_row(self) -> SessionRow | None:
        if self.offers.get("episode") == "connection":
            return CONNECTION_ROW
        return self.session


def _tuple(raw: dict[str, Any], key: str) -> tuple[str, ...]:
    return tuple(str(v) for v in raw.get(key) or ())


def _events(raw: dict[str, Any]) -> dict[str, tuple[str, ...]]:
    """`start: SessionStart` or `start: [TaskStart, TaskResume]`: one or more client events per boundary."""
    return {ours: (str(theirs),) if isinstance(theirs, str) else tuple(str(t) for t in theirs)
            for ours, theirs in (raw.get("events") or {}).items()}


def _install(raw: dict[str, Any] | None) -> InstallRow | None:
    if not raw:
        return None
    switch = str(raw["switch"]).split(".", 1) if raw.get("switch") else None
    cap = raw.get("end_cap_seconds")
    return InstallRow(
        hook_style=raw.get("hook_style"), command_key=str(raw.get("command_key", "command")),
        timeout_key=str(raw.get("timeout_key", "timeout")), handler_extra=dict(raw.get("handler_extra") or {}),
        top_extra=dict(raw.get("top_extra") or {}), end_cap_seconds=int(cap) if cap is not None else None,
        mcp_style=raw.get("mcp_style", "json"), mcp_extra=dict(raw.get("mcp_extra") or {}),
        switch=(switch[0], switch[1]) if switch and len(switch) == 2 else None,
        notes=_tuple(raw, "notes"), approve=_tuple(raw, "approve"),
        local_config=str(raw["local_config"]) if raw.get("local_config") else None,
        trust=str(raw["trust"]) if raw.get("trust") else None,
        unsupported=str(raw["unsupported"]) if raw.get("unsupported") else None)


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
        session=SessionRow(events=_events(s), session_keys=_tuple(s, "session_keys"),
                           source_keys=_tuple(s, "source_keys"), reason_keys=_tuple(s, "reason_keys"),
                           deliberate=frozenset(_tuple(s, "deliberate")),
                           turn_status_keys=_tuple(s, "turn_status_keys"),
                           turn_completed=frozenset(_tuple(s, "turn_completed"))) if s else None,
        prompt=PromptRow(event=str(p.get("event", "")), text_keys=_tuple(p, "text_keys"),
                         session_keys=_tuple(p, "session_keys"), id_keys=_tuple(p, "id_keys"),
                         source_keys=_tuple(p, "source_keys"),
                         person_sources=frozenset(_tuple(p, "person_sources")),
                         start_races=p.get("start_races") is True) if p else None,
        install=_install(raw.get("install")),
        resume=_resume(raw.get("resume")),
        mcp_client=McpClientRow(names=_tuple(raw["mcp_client"], "names"), evidence=str(raw["mcp_client"].get(
            "evidence", ""))) if isinstance(raw.get("mcp_client"), dict) else None,
        state_file=_state_file(raw.get("state_file")),
    )


def _state_file(raw: dict[str, Any] | None) -> StateFileRow | None:
    if not isinstance(raw, dict):
        return None

    def key(name: str) -> str | None:
        return str(raw[name]) if raw.get(name) else None

    return StateFileRow(paths=_tuple(raw, "paths"), prompt_key=key("prompt_key"),
                        prompt_event=str(raw.get("prompt_event") or ""),
                        prompt_sources=frozenset(_tuple(raw, "prompt_sources")), prompt_tag=key("prompt_tag"),
                        messages_key=key("messages_key"), dispatched_key=key("dispatched_key"),
                        status_key=key("status_key"),
                        orderly=frozenset(_tuple(raw, "orderly")), exit_code_key=key("exit_code_key"),
                        ended_key=key("ended_key"), pid_key=key("pid_key"), evidence=str(raw.get("evidence", "")))


def _resume(raw: dict[str, Any] | None) -> ResumeRow | None:
    if not raw:
        return None
    return ResumeRow(command=str(raw.get("command", "")), evidence=str(raw.get("evidence", "")))


_RAW: dict[str, Any] | None = None  # the shipped declaration, parsed once per process
_BUILT: dict[str, Provider] = {}  # providers built from it so far: a hook builds only its own


def _read(path: Path) -> dict[str, Any]:
    try:
        raw = json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, ValueError) as exc:
        raise ContractError(f"the providers declaration {path.name} cannot be read: {exc}",
                            "reinstall majordomus") from exc
    table: dict[str, Any] = raw["providers"]
    return table


def _shipped() -> dict[str, Any]:
    global _RAW
    if _RAW is None:
        _RAW = _read(JSON_PATH)
    return _RAW


def load_providers(path: Path = JSON_PATH) -> dict[str, Provider]:
    if path != JSON_PATH:
        return {name: _provider(name, body) for name, body in _read(path).items()}
    return {name: get_provider(name) for name in _shipped()}


def get_provider(name: str) -> Provider:
    table = _shipped()
    if name not in table:
        raise MissingError(f"unknown provider '{name}' (declared: {', '.join(sorted(table))})",
                           "pass one of those to --provider")
    if name not in _BUILT:
        _BUILT[name] = _provider(name, table[name])
    return _BUILT[name]


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
        found += _session_problems(name, body.get("session"))
        found += _install_problems(name, body)
        found += _resume_problems(name, body.get("resume"))
        found += _mcp_client_problems(name, body.get("mcp_client"))
        found += _state_file_problems(name, body.get("state_file"))
    return found


STATE_FILE_KEYS = frozenset({"paths", "prompt_key", "prompt_event", "prompt_sources", "prompt_tag", "messages_key",
                             "dispatched_key", "status_key", "orderly", "exit_code_key", "ended_key", "pid_key",
                             "evidence"})


def _state_file_problems(name: str, row: Any) -> list[str]:
    """A state_file row names where the client keeps a session's file, what it reads there, and the evidence."""
    if row is None:
        return []
    if not isinstance(row, dict):
        return [f"{name}: state_file is not a mapping"]
    found = [f"{name}: state_file.{key} is not a state_file key" for key in row if key not in STATE_FILE_KEYS]
    paths = row.get("paths")
    if not isinstance(paths, list) or not paths or not all(
            isinstance(p, str) and p.count("{session}") >= 1 and p.startswith(("$", "~/")) for p in paths):
        found.append(f"{name}: state_file.paths must list $VAR/… or ~/… paths naming {{session}}")
    if row.get("prompt_key") and not (row.get("prompt_event") and row.get("messages_key")):
        found.append(f"{name}: state_file.prompt_key needs prompt_event and messages_key (whose emptiness says "
                     "the prompt is this task's)")
    if row.get("status_key") and not (row.get("orderly") and row.get("ended_key") and row.get("pid_key")):
        found.append(f"{name}: state_file.status_key needs orderly, ended_key and pid_key")
    if len(str(row.get("evidence") or "").strip()) < 25:
        found.append(f"{name}: state_file.evidence is empty or too short to be evidence")
    return found


def _mcp_client_problems(name: str, row: Any) -> list[str]:
    """An mcp_client row names the client's `clientInfo.name` values, with the evidence that it says them."""
    if row is None:
        return []
    if not isinstance(row, dict):
        return [f"{name}: mcp_client is not a mapping"]
    found = [f"{name}: mcp_client.{key} is not an mcp_client key" for key in row if key not in ("names", "evidence")]
    names = row.get("names")
    if not isinstance(names, list) or not names or not all(isinstance(n, str) and n for n in names):
        found.append(f"{name}: mcp_client.names must list the client's clientInfo names")
    if len(str(row.get("evidence") or "").strip()) < 25:
        found.append(f"{name}: mcp_client.evidence is empty or too short to be evidence")
    return found


def provider_of_mcp_client(client_name: str) -> Provider | None:
    """The hook provider whose client says `client_name` in its MCP initialize, if one declares it."""
    for name, raw in _shipped().items():
        row = raw.get("mcp_client")
        if isinstance(row, dict) and client_name in (row.get("names") or ()):
            return get_provider(name)
    return None


def _session_problems(name: str, session: Any) -> list[str]:
    if not isinstance(session, dict):
        return []
    found: list[str] = []
    for ours, theirs in (session.get("events") or {}).items():
        names = [theirs] if isinstance(theirs, str) else theirs
        if ours not in SESSION_EVENTS:
            found.append(f"{name}: session.events.{ours} is not one of {', '.join(SESSION_EVENTS)}")
        if not isinstance(names, list) or not names or not all(isinstance(n, str) and n for n in names):
            found.append(f"{name}: session.events.{ours} must name one client event or a list of them")
    return found


def _resume_problems(name: str, row: Any) -> list[str]:
    """A resume row is the client's command with one `{session}` and the evidence that the client takes it."""
    if row is None:
        return []
    if not isinstance(row, dict):
        return [f"{name}: resume is not a mapping"]
    found = [f"{name}: resume.{key} is not a resume key" for key in row if key not in ("command", "evidence")]
    if str(row.get("command", "")).count("{session}") != 1:
        found.append(f"{name}: resume.command must name {{session}} exactly once")
    if len(str(row.get("evidence") or "").strip()) < 25:
        found.append(f"{name}: resume.evidence is empty or too short to be evidence")
    return found


def _install_problems(name: str, body: dict[str, Any]) -> list[str]:
    """An install row is a shape install can write, or a sentence saying why there is none; never both."""
    offers = body.get("offers") or {}
    row = body.get("install")
    hooks_offered = offers.get("episode") == "hooks" or offers.get("prompts") == "hook"
    if offers.get("episode") == "connection":
        return [f"{name}: a connection provider is wired by its MCP entry alone; remove its install row"] if row else []
    if row is None:
        if not hooks_offered:
            return []
        return [f"{name}: offers hooks but has no install row (a shape, or unsupported: <why>)"]
    if not isinstance(row, dict):
        return [f"{name}: install is not a mapping"]
    found = [f"{name}: install.{key} is not an install key" for key in row if key not in INSTALL_KEYS]
    if row.get("unsupported") is not None:
        if len(str(row["unsupported"]).strip()) < 25:
            found.append(f"{name}: install.unsupported is too short to say why")
        if set(row) != {"unsupported"}:
            found.append(f"{name}: install.unsupported stands alone; remove the shape keys beside it")
        return found
    if row.get("hook_style") not in HOOK_STYLES:
        found.append(f"{name}: install.hook_style is {row.get('hook_style')!r}, not one of {', '.join(HOOK_STYLES)}")
    if row.get("mcp_style", "json") not in MCP_STYLES:
        found.append(f"{name}: install.mcp_style is {row.get('mcp_style')!r}, not one of {', '.join(MCP_STYLES)}")
    if not body.get("config"):
        found.append(f"{name}: an install shape needs the config file it writes")
    switch = row.get("switch")
    if switch is not None and (not isinstance(switch, str) or len(switch.split(".")) != 2):
        found.append(f"{name}: install.switch is {switch!r}, not section.key")
    return found


def yaml_to_json_text() -> str:
    import json

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
            print("majordomus: providers.json is stale; "
                  "run python -m majordomus.clients.providers --write-json", file=sys.stderr)
        return 10 if found or stale else 0
    print("usage: python -m majordomus.clients.providers --write-json | --check [providers.yaml]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
