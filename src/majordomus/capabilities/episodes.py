"""The episode capabilities: `episodes.list`, `episodes.attach`, `episodes.detach` (REFERENCE §10.1).

Each error is a sentence that says what to do; the board does the work.
"""

from __future__ import annotations

from majordomus.capabilities.registry import (
    Caller,
    Capability,
    Hints,
    HttpExposure,
    JsonObject,
    Refusal,
    Services,
)
from majordomus.capabilities.text import EXTERNAL_ID_PATTERN
from majordomus.clients.providers import load_providers
from majordomus.episodes.board import Ended

EXTERNAL_ID_MAX = 1024
WHY = "it is what a reconnecting client is recognised by"

NO_SESSION = "this call came through an interface with no connection to bind an episode to"
ATTACH_OVER_HTTP = f"attach needs an MCP session: {NO_SESSION} (call the majordomus_session_attach tool)"
DETACH_OVER_HTTP = f"detach without 'external_id' needs an MCP session: {NO_SESSION}; name the episode to close"
DETACH_STATELESS = ("detach without 'external_id' needs a connection: a 2026-07-28 request over HTTP has none, so "
                    "the external_id is the episode's only handle; name the episode to close")

HOOKS_END = ("this sitting's episode is its client's hook episode: the client's own end closes it (as closed "
             "when it ends on purpose, interrupted when it is cut short); this server let go of it and closed nothing")
HOOKS: JsonObject = {"type": "string", "minLength": 1, "description":
                     "present when the caller's client records this sitting through its hooks (SPEC §4.3: one "
                     "sitting, one episode): which episode that is, or why none was opened"}

_EXTERNAL_ID: JsonObject = {
    "type": "string",
    "minLength": 1,
    "maxLength": EXTERNAL_ID_MAX,
    "pattern": EXTERNAL_ID_PATTERN,  # what check_external_id accepts, to the character
    "x-majordomus-why": WHY,
    "description": "the client's durable name for its sitting (a thread or conversation id); one line",
}

EPISODE_SCHEMA: JsonObject = {
    "type": "object",
    "properties": {
        "external_id": {"type": "string"},
        "provider": {"type": "string", "enum": sorted(load_providers()),
                     "description": "`generic` for a connection episode; a hook client's name for its hook episode"},
        "session_id": {"type": "string", "description": "the hook episode's id (present for a hook episode only)"},
        "peer": {"type": "string", "description": "the peer holding it; absent while detached"},
        "opened_at": {"type": "string", "format": "date-time"},
        "last_activity_seconds_ago": {"type": "integer", "minimum": 0},
        "attachments": {"type": "integer", "minimum": 1},
        "state": {"type": "string", "enum": ["open", "detached"]},
        "repository": {"type": "string", "minLength": 1,
                       "description": "the report line of `capture session`, verbatim"},
    },
    "required": ["external_id", "provider", "opened_at", "last_activity_seconds_ago", "attachments", "state",
                 "repository"],
    "additionalProperties": False,
}


def check_external_id(raw: str) -> str | Refusal:
    """Trimmed; refused when blank, not one line, or carrying control characters."""
    value = raw.strip()
    if not value:
        return Refusal("invalid_input", f"argument 'external_id' is required and must not be blank: {WHY}")
    if "\n" in value or "\r" in value:
        return Refusal("invalid_input", "argument 'external_id' must be one line")
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in value):
        return Refusal("invalid_input", "argument 'external_id' must not contain control characters")
    return value


def list_episodes(services: Services, caller: Caller, args: JsonObject) -> JsonObject | Refusal:
    named = check_external_id(args["external_id"]) if "external_id" in args else None
    if isinstance(named, Refusal):  # the schema's pattern says the same: a client that trusts it never sees this
        return named
    mine = None
    if caller.peer is not None:
        mine = services.board.of_peer(caller.peer)
    elif caller.stateless and named is not None:
        handle = services.peers.find_handle(named)
        if handle is not None:  # naming it is the stateless peer's heartbeat
            services.peers.touch(handle.id)
            services.board.touch(handle.id)
            mine = services.board.of_peer(handle.id)
    episodes = services.board.all()
    result: JsonObject = {
        "open": sum(1 for e in episodes if e["state"] == "open"),
        "detached": sum(1 for e in episodes if e["state"] == "detached"),
        "episodes": episodes,
    }
    if mine is not None:  # omitted, not null, when the caller holds nothing
        result["mine"] = mine
    return result


def attach(services: Services, caller: Caller, args: JsonObject) -> JsonObject | Refusal:
    if caller.via != "mcp":
        return Refusal("refused", ATTACH_OVER_HTTP)
    external_id = check_external_id(args["external_id"])
    if isinstance(external_id, Refusal):
        return external_id
    if caller.stateless:
        peer_id = services.peers.handle_peer(external_id, caller.client, caller.era).id
    elif caller.peer is not None:
        peer_id = caller.peer
    else:
        return Refusal("refused", ATTACH_OVER_HTTP)
    episode, resumed, hooks = services.board.attach_from(
        peer_id, external_id, client=caller.sitting, client_name=caller.client.name if caller.client else None,
        bridge=caller.bridge, replay=caller.replay)
    if episode is None and hooks is None:  # only a replay finds nothing: its episode was closed meanwhile
        return Refusal("not_found", f"the episode of {external_id!r} is no longer open; a replayed attach opens "
                                    "none (attach again to open a new one)")
    result: JsonObject = {"resumed": resumed, "reattach_grace_seconds": services.board.grace_seconds}
    if episode is not None:
        result = {"episode": episode, **result}
    if hooks is not None:  # one sitting, one episode: the client's hooks record it (SPEC §4.3)
        result["hooks"] = hooks
    return result


def detach(services: Services, caller: Caller, args: JsonObject) -> JsonObject | Refusal:
    if "external_id" in args:
        external_id = check_external_id(args["external_id"])
        if isinstance(external_id, Refusal):
            return external_id
    elif caller.via != "mcp":
        return Refusal("refused", DETACH_OVER_HTTP)
    elif caller.stateless:
        return Refusal("refused", DETACH_STATELESS)
    else:
        assert caller.peer is not None
        bound = services.board.unbind(peer=caller.peer)
        if bound is not None:
            return {"episode": bound, "hooks": HOOKS_END}
        held = services.board.of_peer(caller.peer)
        if held is None:
            ended = services.board.ended(peer=caller.peer)
            if ended is not None:  # its server closed it and died before answering: this is the retry
                return _ended(*ended)
            return Refusal("refused", f"peer {caller.peer} holds no episode; call majordomus_session_attach first, "
                                      "or name the episode to close")
        external_id = held["external_id"]
    episode = services.board.close(external_id, "detach")
    if episode is None:
        bound = services.board.unbind(external_id=external_id)
        if bound is not None:
            return {"episode": bound, "hooks": HOOKS_END}
        ended = services.board.ended(external_id=external_id)
        if ended is not None:
            return _ended(*ended)
        return Refusal("not_found", f"no episode '{external_id}' on this server")
    handle = services.peers.find_handle(external_id)
    if handle is not None:  # a stateless peer is nothing but its handle: it leaves with its episode
        services.peers.remove(handle.id)
    return {"episode": episode}


def _ended(view: JsonObject, ended: Ended) -> JsonObject | Refusal:
    """A detach that finds its episode closed already: done, when it was closed by a detach (a retry whose first
    answer died with its server); otherwise the truth of how it ended, and nothing closed."""
    if ended.reason == "detach":
        return {"episode": view}
    return Refusal("not_found", f"the episode of {ended.external_id!r} ended before this detach ({ended.line}); "
                                "nothing was closed now")


_TAGS = ("episodes", "session", "coordination")

CAPABILITIES: tuple[Capability, ...] = (
    Capability(
        id="episodes.list",
        kind="query",
        title="Episodes",
        description="The connection episodes on this server: how many are open and detached, each episode, and "
                    "`mine`, the one the caller holds (omitted when it holds none). A 2026-07-28 client over HTTP "
                    "may name its `external_id`: the call is then its heartbeat.",
        input_schema={
            "type": "object",
            "properties": {"external_id": {**_EXTERNAL_ID, "description":
                                           "optional: the episode a stateless (2026-07-28) HTTP client holds"}},
            "additionalProperties": False,
        },
        output_schema={
            "type": "object",
            "properties": {
                "open": {"type": "integer", "minimum": 0},
                "detached": {"type": "integer", "minimum": 0},
                "episodes": {"type": "array", "items": EPISODE_SCHEMA},
                "mine": EPISODE_SCHEMA,
            },
            "required": ["open", "detached", "episodes"],
            "additionalProperties": False,
        },
        effect="read",
        hints=Hints(read_only=True, idempotent=True),
        stability="behaviorally_verified",
        handler=list_episodes,
        tags=_TAGS,
        tool="majordomus_episodes",
        http=HttpExposure("GET", "/api/v1/episodes"),
    ),
    Capability(
        id="episodes.attach",
        kind="command",
        title="Attach an episode",
        description="Bind this connection to the episode of `external_id`: resume it when this server has it "
                    "(`resumed: true`), otherwise open it through `capture session --provider generic`. A "
                    "connection holds at most one episode; when it goes away the episode is detached, not closed, "
                    "and can be resumed within `reattach_grace_seconds`. One sitting, one episode: when the "
                    "client process that spawned this server ran a hook start here, the answer is that hook "
                    "episode and nothing is opened; a client whose hooks are wired here but have no episode open "
                    "for it gets no `episode`, and `hooks` says why.",
        input_schema={
            "type": "object",
            "properties": {"external_id": _EXTERNAL_ID},
            "required": ["external_id"],
            "additionalProperties": False,
        },
        output_schema={
            "type": "object",
            "properties": {
                "episode": EPISODE_SCHEMA,
                "resumed": {"type": "boolean"},
                "reattach_grace_seconds": {"type": "integer", "minimum": 1},
                "hooks": HOOKS,
            },
            "required": ["resumed", "reattach_grace_seconds"],
            "additionalProperties": False,
        },
        effect="repository_mutation",
        hints=Hints(read_only=False, idempotent=True),
        stability="behaviorally_verified",
        handler=attach,
        tags=_TAGS,
        tool="majordomus_session_attach",
        http=HttpExposure("POST", "/api/v1/episodes/attach"),
        errors=(("refused", ATTACH_OVER_HTTP),
                ("invalid_input", f"argument 'external_id' is required and must not be blank: {WHY}"),
                ("invalid_input", "argument 'external_id' must be one line")),
    ),
    Capability(
        id="episodes.detach",
        kind="command",
        title="Detach (close) an episode",
        description="End an episode on purpose: it is closed through `capture session --event end` with reason "
                    "`detach`, so its record says `outcome: closed`. Without `external_id` it closes the episode "
                    "the caller's connection holds. A detach whose episode a detach closed already (a bridge's "
                    "retry after its server died before answering) answers with that closed episode and closes "
                    "nothing again.",
        input_schema={
            "type": "object",
            "properties": {"external_id": {**_EXTERNAL_ID, "description":
                                           "the episode to close; required when the call has no connection"}},
            "additionalProperties": False,
        },
        output_schema={
            "type": "object",
            "properties": {"episode": EPISODE_SCHEMA, "hooks": HOOKS},
            "required": ["episode"],
            "additionalProperties": False,
        },
        effect="repository_mutation",
        hints=Hints(read_only=False, destructive=True, idempotent=False),
        stability="behaviorally_verified",
        handler=detach,
        tags=_TAGS,
        tool="majordomus_session_detach",
        http=HttpExposure("POST", "/api/v1/episodes/detach"),
        errors=(("refused", DETACH_OVER_HTTP),
                ("refused", "peer <pN> holds no episode; call majordomus_session_attach first, or name the episode "
                            "to close"),
                ("refused", DETACH_STATELESS),
                ("not_found", "the episode of '<id>' ended before this detach (episode closed (interrupted, "
                              "reason expired) into <record>); nothing was closed now"),
                ("not_found", "no episode '<id>' on this server")),
    ),
)
