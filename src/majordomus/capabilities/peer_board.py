"""The peers of one server process (`p1`, `p2`, …), what each announced, and where announced scopes overlap.

A peer is a connection (the server's own stdio client, an HTTP session, a bridged stdio) or, for a
2026-07-28 client over HTTP, the handle of one `external_id`.
"""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from majordomus.capabilities.calls import ClientInfo, JsonObject
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
                overlaps.append({"peer": other.id, "client": client_json(other), "intent": other.announcement.intent,
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


def client_json(peer: Peer) -> JsonObject:
    return peer.client.as_json() if peer.client else {"name": "unknown", "version": ""}
