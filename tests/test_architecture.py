"""The tree is the architecture: no import circles inside `src/`, and imports point down the rooms.

Every import counts — at module level, inside a function, under `TYPE_CHECKING` — because a lazy import
is still a dependency a newcomer has to know about.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "majordomus"

# Rooms from the bottom up; a module may import its own room or any room below it. Longest prefix wins.
RANKS: dict[str, int] = {
    "majordomus": 0,  # __init__ (the version), errors, values, simple_yaml, findings, identity, layout, policy, ledger
    "majordomus.clients.payload": 1,  # what every hook reads: the payload and the providers declaration
    "majordomus.clients.providers": 1,
    "majordomus.mcp.lease": 1,  # the lease is state under .ai/local: recover and doctor read it, the server writes it
    "majordomus.episodes": 2,
    "majordomus.archive": 3,
    "majordomus.clients": 4,  # install and status
    "majordomus.usage": 4,  # what an ended episode used, from its client's own record; read by history, telemetry
    "majordomus.layer": 5,
    "majordomus.doctor": 5,
    "majordomus.history": 5,  # reads the record back: the timeline, show, the search index
    "majordomus.capabilities": 6,
    "majordomus.telemetry": 6,  # the OTLP export: reads the record back like history, beside the capabilities
    "majordomus.mcp": 7,
    "majordomus.commands": 8,
    "majordomus.cli": 9,
    "majordomus.__main__": 10,
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imports_of(name: str) -> set[str]:
    """The majordomus modules `name` imports, anywhere in its text."""
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                child = f"{node.module}.{alias.name}"
                found.add(child if child in MODULES else node.module)
    return {m for m in found if m in MODULES and m != name}


GRAPH = {name: imports_of(name) for name in MODULES}


def rank(name: str) -> int:
    best = max((prefix for prefix in RANKS if name == prefix or name.startswith(prefix + ".")), key=len)
    return RANKS[best]


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_cycle_finder_finds_a_planted_circle() -> None:
    planted = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(planted) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_there_is_no_import_cycle_inside_src() -> None:
    assert cycles(GRAPH) == []


def test_every_module_has_a_room() -> None:
    assert len(MODULES) > 40  # the walk found the package
    assert all(rank(name) >= 0 for name in MODULES)


def test_imports_point_down_the_rooms() -> None:
    upward = sorted(f"{name} (room {rank(name)}) imports {dep} (room {rank(dep)})"
                    for name, deps in GRAPH.items() for dep in deps if rank(dep) > rank(name))
    assert upward == []


def test_only_commands_import_the_command_line_context() -> None:
    users = sorted(name for name, deps in GRAPH.items()
                   if deps & {"majordomus.cli", "majordomus.commands.context"}
                   and not name.startswith("majordomus.commands")
                   and name not in ("majordomus.cli", "majordomus.__main__"))
    assert users == []
    assert not [name for name, deps in GRAPH.items() if "majordomus.cli" in deps and name != "majordomus.__main__"]


def test_the_architecture_page_names_every_room() -> None:
    page = (SRC.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    rooms = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists())
    assert rooms and [room for room in rooms if f"`{room}/`" not in page] == []
