"""Peers of the shared server (`p1`, `p2`, …) and the capabilities `peers.list` and `peers.announce`.

A peer is a connection (the server's own stdio client, an HTTP session, a bridged stdio) or, for
a 2026-07-28 client over HTTP, the handle of one `external_id`. Its announcement is what it says it
is working on; announcing answers the overlaps with what the other peers announced.
"""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from majordomus.capabilities.registry import (
    Caller,
    Capability,
    ClientInfo,
    Hints,
    HttpExposure,
    JsonObject,
    Refusal,
    Services,
)
from majordomus.identity import now_utc, rfc3339

Transport = Literal["stdio", "http"]


@dataclass(frozen=True)
class Announcement:
    intent: str
    scope: tuple[str, ...]
    announced_at: str

    def as_json(self) -> JsonObject:
        return {"intent": self.intent, "scope": list(self.scope), "announced_at": self.announced_at}


@dataclass
class Peer:
    id: str
    transport: Transport
    client: ClientInfo | None
    era: str | None
    bridged: bool = False
    handle: str | None = None  # the external_id a stateless HTTP peer is known by
    connected_at: str = field(default_factory=lambda: rfc3339(now_utc()))
    last_seen: float = field(default_factory=time.monotonic)
    announcement: Announcement | None = None

    def label(self) -> str:
        name = self.client.name if self.client else "an unnamed client"
        return f"{self.id} ({name}, {self.transport}{', bridged' if self.bridged else ''})"


class PeerBoard:
    """Every peer of this server process, numbered in order of arrival."""

    def __init__(self, clock: Any = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._peers: dict[str, Peer] = {}
        self._numbers = itertools.count(1)

    def new(self, transport: Transport, client: ClientInfo | None, era: str | None, *,
            bridged: bool = False, handle: str | None = None) -> Peer:
        with self._lock:
            peer = Peer(id=f"p{next(self._numbers)}", transport=transport, client=client, era=era,
                        bridged=bridged, handle=handle, last_seen=self._clock())
            self._peers[peer.id] = peer
            return peer

    def get(self, peer_id: str) -> Peer | None:
        return self._peers.get(peer_id)

    def remove(self, peer_id: str) -> Peer | None:
        with self._lock:
            return self._peers.pop(peer_id, None)

    def touch(self, peer_id: str) -> None:
        peer = self._peers.get(peer_id)
        if peer is not None:
            peer.last_seen = self._clock()

    def all(self) -> list[Peer]:
        with self._lock:
            return sorted(self._peers.values(), key=lambda p: int(p.id[1:]))

    def __len__(self) -> int:
        return len(self._peers)

    def handle_peer(self, external_id: str, client: ClientInfo | None, era: str | None) -> Peer:
        """The stateless HTTP peer known by `external_id`, created on its first attach."""
        with self._lock:
            for peer in self._peers.values():
                if peer.handle == external_id:
                    peer.last_seen = self._clock()
                    if client is not None:
                        peer.client = client
                    return peer
        return self.new("http", client, era, handle=external_id)

    def find_handle(self, external_id: str) -> Peer | None:
        with self._lock:
            return next((p for p in self._peers.values() if p.handle == external_id), None)

    def stale_handles(self, ttl_seconds: float) -> list[Peer]:
        """Stateless peers whose external_id no call has named for longer than the TTL."""
        now = self._clock()
        with self._lock:
            return [p for p in self._peers.values() if p.handle is not None and now - p.last_seen > ttl_seconds]

    def announce(self, peer: Peer, intent: str, scope: list[str]) -> tuple[Announcement, list[JsonObject]]:
        announcement = Announcement(intent=intent, scope=tuple(scope), announced_at=rfc3339(now_utc()))
        with self._lock:
            peer.announcement = announcement  # a new announcement replaces the peer's own earlier claim
            others = [p for p in self._peers.values() if p.id != peer.id and p.announcement is not None]
        overlaps: list[JsonObject] = []
        for other in sorted(others, key=lambda p: int(p.id[1:])):
            assert other.announcement is not None
            shared = sorted({mine for mine in scope for theirs in other.announcement.scope if overlap(mine, theirs)})
            if shared:
                overlaps.append({"peer": other.id, "client": _client_json(other), "intent": other.announcement.intent,
                                 "scope": list(other.announcement.scope), "overlapping": shared})
        return announcement, overlaps


def _normal(path: str) -> str:
    cleaned = path.strip().strip("/")
    while cleaned.startswith("./"):
        cleaned = cleaned[2:]
    return "" if cleaned in ("", ".") else cleaned


def overlap(a: str, b: str) -> bool:
    """Two scopes overlap when one is the other or lies beneath it (`""`/`.` is the whole tree)."""
    x, y = _normal(a), _normal(b)
    return x == y or not x or not y or x.startswith(y + "/") or y.startswith(x + "/")


def _client_json(peer: Peer) -> JsonObject:
    return peer.client.as_json() if peer.client else {"name": "unknown", "version": ""}


def peer_json(peer: Peer, services: Services, now: float) -> JsonObject:
    view: JsonObject = {"id": peer.id, "client": _client_json(peer), "transport": peer.transport,
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
        return Refusal("invalid_input", "argument 'intent' must be one non-blank line: say what you are about to do")
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
                "intent": {"type": "string", "maxLength": 500, "description": "one line: what you are about to do"},
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
