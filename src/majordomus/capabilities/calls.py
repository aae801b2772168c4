"""The values of one call of a capability: who calls (`Caller`, `ClientInfo`), and an expected failure (`Refusal`).

The bottom of `capabilities/`: the registry, the peer board and every surface import these; they import nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

RefusalCode = Literal["invalid_input", "forbidden", "not_found", "refused", "internal"]
JsonObject = dict[str, Any]

# One place maps a refusal code to its HTTP status; MCP carries the code in `_meta`.
HTTP_STATUS: dict[RefusalCode, int] = {
    "invalid_input": 400,
    "forbidden": 403,
    "not_found": 404,
    "refused": 422,
    "internal": 500,
}



@dataclass(frozen=True)
class Refusal:
    """An expected failure: a value, turned into `isError` over MCP and 4xx over HTTP in one place each."""

    code: RefusalCode
    message: str

    @property
    def http_status(self) -> int:
        return HTTP_STATUS[self.code]


@dataclass(frozen=True)
class ClientInfo:
    name: str
    version: str

    def as_json(self) -> JsonObject:
        return {"name": self.name, "version": self.version}


@dataclass(frozen=True)
class Caller:
    """Who is calling, as far as a capability needs to know.

    `peer` is set when the call arrived on a connection (stdio, an HTTP session, a bridged stdio);
    `stateless` marks a 2026-07-28 request over HTTP, where the `external_id` is the only handle.
    """

    via: Literal["mcp", "http"]
    peer: str | None = None
    stateless: bool = False
    client: ClientInfo | None = None
    era: str | None = None
    loopback: bool = True
    sitting: str | None = None  # `<pid>@<start ticks>` of the client process that spawned a stdio peer
    bridge: int | None = None  # the pid of the bridge a bridged stdio peer speaks through
    replay: bool = False  # a bridge replaying its client's attach after failover: resume, never open
