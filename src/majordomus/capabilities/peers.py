"""The capabilities `peers.list` and `peers.announce` over the peer board.

Announcing answers the overlaps with what the other peers announced.
"""

from __future__ import annotations

import time

from majordomus.capabilities.peer_board import Peer, client_json
from majordomus.capabilities.registry import (
    Caller,
    Capability,
    Hints,
    HttpExposure,
    JsonObject,
    Refusal,
    Services,
)
from majordomus.capabilities.text import ONE_LINE_PATTERN

INTENT_INVALID = "argument 'intent' must be one non-blank line: say what you are about to do"


def peer_json(peer: Peer, services: Services, now: float) -> JsonObject:
    view: JsonObject = {"id": peer.id, "client": client_json(peer), "transport": peer.transport,
                        "bridged": peer.bridged, "era": peer.era or "unknown", "connected_at": peer.connected_at,
                        "last_activity_seconds_ago": max(0, int(now - peer.last_seen))}
    episode = services.board.of_peer(peer.id)
    if episode is not None:
        view["episode"] = episode["external_id"]
    if peer.announcement is not None:
        view["announcement"] = peer.announcement.as_json()
    return view


# -- capabilities ------------------------------------------------------------------------------

_CLIENT_SCHEMA: JsonObject = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "version": {"type": "string"}},
    "required": ["name", "version"],
}

_ANNOUNCEMENT_SCHEMA: JsonObject = {
    "type": "object",
    "properties": {
        "intent": {"type": "string"},
        "scope": {"type": "array", "items": {"type": "string"}},
        "announced_at": {"type": "string", "format": "date-time"},
    },
    "required": ["intent", "scope", "announced_at"],
}

PEER_SCHEMA: JsonObject = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "pattern": "^p[0-9]+$"},
        "client": _CLIENT_SCHEMA,
        "transport": {"type": "string", "enum": ["stdio", "http"]},
        "bridged": {"type": "boolean"},
        "era": {"type": "string"},
        "connected_at": {"type": "string", "format": "date-time"},
        "last_activity_seconds_ago": {"type": "integer", "minimum": 0},
        "episode": {"type": "string"},
        "announcement": _ANNOUNCEMENT_SCHEMA,
    },
    "required": ["id", "client", "transport", "bridged", "era", "connected_at", "last_activity_seconds_ago"],
}


def list_peers(services: Services, caller: Caller, args: JsonObject) -> JsonObject | Refusal:
    now = time.monotonic()
    peers = [peer_json(p, services, now) for p in services.peers.all()]
    result: JsonObject = {"count": len(peers), "peers": peers}
    if caller.peer is not None:
        result["you"] = caller.peer
    return result


def announce(services: Services, caller: Caller, args: JsonObject) -> JsonObject | Refusal:
    peer = services.peers.get(caller.peer) if caller.peer is not None else None
    if peer is None:
        return Refusal("refused", "announce needs an MCP connection: this call came through an interface with no "
                                  "peer to speak for (call the majordomus_announce tool from an initialised session)")
    intent = args["intent"].strip()
    if not intent or "\n" in intent or "\r" in intent:
        return Refusal("invalid_input", INTENT_INVALID)
    scope = [s.strip() for s in args.get("scope", [])]
    announcement, overlaps = services.peers.announce(peer, intent, scope)
    return {"announcement": {"peer": peer.id, **announcement.as_json()}, "overlaps": overlaps}


CAPABILITIES: tuple[Capability, ...] = (
    Capability(
        id="peers.list",
        kind="query",
        title="Peers",
        description="Every peer of this shared server: its id (p1, p2, …), its client's name and version, its "
                    "transport, the episode it holds and what it announced.",
        input_schema={"type": "object", "properties": {}, "additionalProperties": False},
        output_schema={
            "type": "object",
            "properties": {
                "count": {"type": "integer", "minimum": 0},
                "peers": {"type": "array", "items": PEER_SCHEMA},
                "you": {"type": "string", "description": "the caller's own peer id; absent over plain HTTP"},
            },
            "required": ["count", "peers"],
        },
        effect="read",
        hints=Hints(read_only=True, idempotent=True),
        stability="behaviorally_verified",
        handler=list_peers,
        tags=("peers", "coordination"),
        tool="majordomus_peers",
        http=HttpExposure("GET", "/api/v1/peers"),
    ),
    Capability(
        id="peers.announce",
        kind="command",
        title="Announce",
        description="Say what you are about to work on (an intent and the paths it touches); the answer lists the "
                    "other peers whose announced scope overlaps yours. A new announcement replaces your last one.",
        input_schema={
            "type": "object",
            "properties": {
                "intent": {"type": "string", "minLength": 1, "maxLength": 500, "pattern": ONE_LINE_PATTERN,
                           "x-majordomus-invalid": INTENT_INVALID, "description": "one line: what you are about to do"},
                "scope": {"type": "array", "maxItems": 100, "items": {"type": "string", "maxLength": 1024},
                          "description": "repository paths (files or directories) the work touches"},
            },
            "required": ["intent"],
            "additionalProperties": False,
        },
        output_schema={
            "type": "object",
            "properties": {
                "announcement": {
                    "type": "object",
                    "properties": {"peer": {"type": "string"}, **_ANNOUNCEMENT_SCHEMA["properties"]},
                    "required": ["peer", "intent", "scope", "announced_at"],
                },
                "overlaps": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "peer": {"type": "string"},
                            "client": _CLIENT_SCHEMA,
                            "intent": {"type": "string"},
                            "scope": {"type": "array", "items": {"type": "string"}},
                            "overlapping": {"type": "array", "items": {"type": "string"}},
                        },
                        "required": ["peer", "client", "intent", "scope", "overlapping"],
                    },
                },
            },
            "required": ["announcement", "overlaps"],
        },
        effect="process_state",
        hints=Hints(read_only=False, idempotent=True),
        stability="behaviorally_verified",
        handler=announce,
        tags=("peers", "coordination"),
        tool="majordomus_announce",
        http=HttpExposure("POST", "/api/v1/peers/announce"),
        errors=(("refused", "announce needs an MCP connection: …"),
                ("invalid_input", "argument 'intent' must be one non-blank line: …")),
    ),
)
