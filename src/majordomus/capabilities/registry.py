"""The capability registry: each capability declared once as a typed descriptor (SPEC §8.1).

Every projection (MCP tool, HTTP route, OpenAPI operation, reference page) reads these
descriptors; building a registry refuses duplicate ids, tool names and routes. No Starlette here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Union

from majordomus.capabilities.calls import HTTP_STATUS, Caller, ClientInfo, JsonObject, Refusal, RefusalCode
from majordomus.errors import ContractError

if TYPE_CHECKING:
    from majordomus.capabilities.peer_board import PeerBoard
    from majordomus.episodes.board import Board
    from majordomus.layout import Layout

__all__ = ["HTTP_STATUS", "Caller", "ClientInfo", "JsonObject", "Refusal", "RefusalCode"]

Kind = Literal["query", "command"]
Effect = Literal["read", "process_state", "repository_mutation"]
Stability = Literal["implemented", "behaviorally_verified", "experimental", "planned", "unsupported"]
Method = Literal["GET", "POST"]

_ID = re.compile(r"[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*")
_TOOL = re.compile(r"[a-z0-9_]+")
_PATH = re.compile(r"/api/v1(/[a-z0-9_-]+)+")


@dataclass(frozen=True)
class Services:
    """What handlers act on: the episode board and the peer board of this server process, and the layout of the
    repository it serves (the history capabilities read its records; None where a test builds boards alone)."""

    board: Board
    peers: PeerBoard
    layout: Layout | None = None


Handler = Callable[[Services, Caller, JsonObject], Union[JsonObject, Refusal]]


@dataclass(frozen=True)
class Hints:
    """MCP tool annotations (2025-06-18 `ToolAnnotations`)."""

    read_only: bool
    destructive: bool = False
    idempotent: bool = False
    open_world: bool = False

    def as_annotations(self, title: str) -> JsonObject:
        return {
            "title": title,
            "readOnlyHint": self.read_only,
            "destructiveHint": self.destructive,
            "idempotentHint": self.idempotent,
            "openWorldHint": self.open_world,
        }


@dataclass(frozen=True)
class HttpExposure:
    method: Method
    path: str


@dataclass(frozen=True)
class Capability:
    id: str
    kind: Kind
    title: str
    description: str
    input_schema: JsonObject
    output_schema: JsonObject
    effect: Effect
    hints: Hints
    stability: Stability
    handler: Handler = field(repr=False, compare=False)
    tags: tuple[str, ...] = ()
    tool: str | None = None
    http: HttpExposure | None = None
    errors: tuple[tuple[RefusalCode, str], ...] = ()
    blocking: bool = False  # reads the disk or runs git: an HTTP surface serves it off its event loop

    @property
    def module(self) -> str:
        return self.id.split(".", 1)[0]

    @property
    def executable(self) -> bool:
        return self.stability not in ("planned", "unsupported")


class Registry:
    """An ordered, validated set of capabilities with lookups by id, tool name and route."""

    def __init__(self, capabilities: Iterable[Capability]) -> None:
        self._all: tuple[Capability, ...] = tuple(capabilities)
        self._by_id: dict[str, Capability] = {}
        self._by_tool: dict[str, Capability] = {}
        self._by_route: dict[tuple[str, str], Capability] = {}
        self._paths: dict[str, list[Capability]] = {}
        for cap in self._all:
            _check_shape(cap)
            if cap.id in self._by_id:
                raise ContractError(f"capability id {cap.id!r} is declared twice", "give each capability its own id")
            self._by_id[cap.id] = cap
            if cap.tool is not None:
                if cap.tool in self._by_tool:
                    raise ContractError(f"MCP tool name {cap.tool!r} is declared by both "
                                        f"{self._by_tool[cap.tool].id} and {cap.id}", "rename one of the tools")
                self._by_tool[cap.tool] = cap
            if cap.http is not None:
                route = (cap.http.method, cap.http.path)
                if route in self._by_route or cap.http.path in self._paths:
                    raise ContractError(f"HTTP route {cap.http.method} {cap.http.path} is declared twice",
                                        "give each capability its own path")
                self._by_route[route] = cap
                self._paths.setdefault(cap.http.path, []).append(cap)

    def __iter__(self) -> Iterator[Capability]:
        return iter(self._all)

    def __len__(self) -> int:
        return len(self._all)

    def get(self, capability_id: str) -> Capability | None:
        return self._by_id.get(capability_id)

    def by_tool(self, name: str) -> Capability | None:
        return self._by_tool.get(name)

    def by_path(self, path: str) -> Capability | None:
        """The capability served at `path`, whatever the method (a wrong method is a 405)."""
        caps = self._paths.get(path)
        return caps[0] if caps else None

    def tools(self) -> list[Capability]:
        return [cap for cap in self._all if cap.tool is not None and cap.executable]

    def routes(self) -> list[Capability]:
        return [cap for cap in self._all if cap.http is not None]


def _check_shape(cap: Capability) -> None:
    """A malformed exposure refuses to build, like a duplicate does."""
    if not _ID.fullmatch(cap.id):
        raise ContractError(f"capability id {cap.id!r} is not `module.name` in lowercase")
    if cap.tool is not None and not _TOOL.fullmatch(cap.tool):
        raise ContractError(f"MCP tool name {cap.tool!r} of {cap.id} must match [a-z0-9_]+")
    if cap.http is not None:
        if not _PATH.fullmatch(cap.http.path):
            raise ContractError(f"HTTP path {cap.http.path!r} of {cap.id} must lie under /api/v1/")
        if cap.kind == "command" and cap.http.method != "POST":
            raise ContractError(f"command {cap.id} must be bound to POST, not {cap.http.method}")
    if cap.kind == "command" and cap.hints.read_only:
        raise ContractError(f"command {cap.id} cannot be announced as read-only")
    for schema_name, schema in (("input", cap.input_schema), ("output", cap.output_schema)):
        if not isinstance(schema, Mapping) or schema.get("type") != "object":
            raise ContractError(f"the {schema_name} schema of {cap.id} must be a JSON Schema of type object")


def invoke(cap: Capability, services: Services, caller: Caller, arguments: Any) -> JsonObject | Refusal:
    """Check the arguments, guard mutations, run the handler: every surface calls a capability here."""
    from majordomus.capabilities.validate import check

    if not cap.executable:
        return Refusal("refused", f"{cap.id} is {cap.stability} and cannot be called")
    if arguments is None:
        arguments = {}
    problem = check(cap.input_schema, arguments)
    if problem is not None:
        return Refusal("invalid_input", problem)
    if cap.kind == "command" and not caller.loopback:
        # A mutation from another machine could close someone's episode: only this machine may.
        return Refusal("forbidden", f"{cap.id} changes state and is served to loopback callers only; "
                                    "call it from this machine")
    try:
        return cap.handler(services, caller, arguments)
    except Exception as exc:  # noqa: BLE001 - the one boundary where a bug becomes `internal`, not a crash
        return Refusal("internal", f"{cap.id} failed inside the server ({type(exc).__name__}: {exc}); "
                                   "run majordomus doctor and report it")
