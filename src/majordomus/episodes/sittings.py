"""One sitting, one episode (SPEC §4.3): the hook episode an MCP attach comes from, found by evidence.

A client with hooks that also runs our MCP server (its model following the server's instructions) must not get
a second episode for the same sitting. The evidence is the process: each hook start writes the client process
that ran it (`client: <pid>@<start ticks>`, past `sh -c`) into the open file, and a stdio server knows the
process that spawned it the same way. When the two name the same process, the attach *is* that hook episode.
Without that evidence, a client that names itself (`clientInfo.name`) as one whose hooks are wired here is told
that its episodes come from its hooks. Never by nearness in time.
"""

from __future__ import annotations

from dataclasses import dataclass

from majordomus.clients.providers import get_provider, provider_of_mcp_client
from majordomus.episodes import store
from majordomus.episodes.hook import event_wired
from majordomus.errors import MissingError
from majordomus.layout import Layout


@dataclass(frozen=True)
class HookSitting:
    """The hook episode of the attaching client's sitting, or (no `session_id`) the word that its hooks keep it."""

    provider: str
    line: str
    session_id: str | None = None
    started_at: str | None = None


def hook_sitting(layout: Layout, client: str | None, client_name: str | None) -> HookSitting | None:
    """The sitting of the client process `client` (`<pid>@<start ticks>`) when exactly one open hook episode
    names that process and the client's own name fits it, or of a client that calls itself `client_name`;
    None when it is no hook client of this worktree (the attach then opens a connection episode)."""
    mine = [] if not client else [
        e.file for e in store.open_episodes(layout)
        if not e.file.is_connection and e.file.client == client and _names_it(e.file.provider, client_name)]
    pid = client.split("@")[0] if client else None
    if len(mine) == 1:
        found = mine[0]
        return HookSitting(
            provider=found.provider or "unknown", session_id=found.session_id, started_at=found.started_at,
            line=f"this sitting is episode {found.session_id} of {found.provider}, open since {found.started_at} "
                 f"and recorded by its hooks (the client process {pid} that ran its start also runs this server); "
                 "no second episode was opened, and the client's own end closes it")
    prov = provider_of_mcp_client(client_name) if client_name else None
    if mine:
        # two conversations open in one process (Cline after `/clear`, an orchestrator's sittings): which one is
        # this sitting's cannot be told, so neither is held and none is opened; the line says what is open
        named = ", ".join(sorted(str(e.session_id) for e in mine))
        return HookSitting(
            provider=mine[0].provider or (prov.name if prov else "unknown"),
            line=f"{len(mine)} hook episodes are open for this client process ({pid}): {named}; which one this "
                 "sitting is cannot be told, so none was opened here and none is held: each is recorded by its "
                 "hooks and ended by its client's own end, or found vanished once the process is gone")
    if prov is None or not event_wired(layout, prov, "start"):
        return None
    process = f" for this client process ({pid})" if pid else ""
    return HookSitting(
        provider=prov.name,
        line=f"{prov.title} records its episodes through its hooks (wired in {', '.join(prov.hook_files())}); no "
             f"hook episode is open{process}, so none was opened here either: if its hooks do not run, "
             "`majordomus capture status` says why")


def _names_it(provider: str | None, client_name: str | None) -> bool:
    """The attaching client is the hook episode's client by its own word too: a client that names itself in its
    initialize must name itself as that provider declares (`mcp_client`); one that names nothing is taken on the
    process alone. A harness or an editor that runs hooks and other MCP clients from one process is not its sitting."""
    if client_name is None:
        return True
    try:
        row = get_provider(provider or "").mcp_client
    except MissingError:  # an open file naming no provider we know: not this client's
        return False
    return row is not None and client_name in row.names
