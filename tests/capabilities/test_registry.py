"""The registry refuses duplicates and malformed exposures; projections derive every surface from one declaration."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from majordomus.capabilities import projections
from majordomus.capabilities.catalogue import default_registry
from majordomus.capabilities.registry import (
    Capability,
    HttpExposure,
    Refusal,
    Registry,
)
from majordomus.errors import ContractError

ROOT = Path(__file__).resolve().parents[2]


def first() -> Capability:
    return next(iter(default_registry()))


def test_the_shipped_registry_declares_the_episode_and_peer_capabilities_in_order() -> None:
    registry = default_registry()
    assert [c.id for c in registry] == ["episodes.list", "episodes.attach", "episodes.detach", "peers.list",
                                        "peers.announce", "history.episodes", "history.show", "history.commit",
                                        "history.search"]
    assert registry.by_tool("majordomus_session_attach").http == HttpExposure("POST", "/api/v1/episodes/attach")
    assert registry.by_tool("majordomus_episodes").http == HttpExposure("GET", "/api/v1/episodes")
    assert registry.by_tool("majordomus_session_detach").http == HttpExposure("POST", "/api/v1/episodes/detach")


def test_a_duplicate_id_refuses_to_build() -> None:
    cap = first()
    with pytest.raises(ContractError, match="declared twice"):
        Registry([cap, dataclasses.replace(cap, http=None, tool="majordomus_other")])


def test_a_duplicate_tool_name_refuses_to_build() -> None:
    cap = first()
    with pytest.raises(ContractError, match="MCP tool name"):
        Registry([cap, dataclasses.replace(cap, id="episodes.other", http=None)])


def test_a_duplicate_route_refuses_to_build() -> None:
    cap = first()
    with pytest.raises(ContractError, match="HTTP route"):
        Registry([cap, dataclasses.replace(cap, id="episodes.other", tool="other")])


@pytest.mark.parametrize(("change", "match"), [
    ({"id": "NoDot"}, "module.name"),
    ({"tool": "Bad-Name"}, "must match"),
    ({"http": HttpExposure("GET", "/elsewhere")}, "under /api/v1/"),
    ({"kind": "command", "http": None}, "read-only"),
])
def test_a_malformed_exposure_refuses_to_build(change: dict[str, object], match: str) -> None:
    with pytest.raises(ContractError, match=match):
        Registry([dataclasses.replace(first(), **change)])  # type: ignore[arg-type]


def test_a_command_bound_to_get_refuses_to_build() -> None:
    attach = default_registry().get("episodes.attach")
    assert attach is not None
    with pytest.raises(ContractError, match="POST"):
        Registry([dataclasses.replace(attach, http=HttpExposure("GET", "/api/v1/episodes/attach"))])


def test_every_tool_projection_carries_schemas_annotations_and_its_id() -> None:
    for cap in default_registry().tools():
        tool = projections.tool(cap)
        jsonschema.Draft202012Validator.check_schema(tool["inputSchema"])
        jsonschema.Draft202012Validator.check_schema(tool["outputSchema"])
        assert tool["annotations"]["readOnlyHint"] is (cap.kind == "query")
        assert tool["_meta"]["majordomus"]["id"] == cap.id


def test_results_and_refusals_have_one_wire_shape_each() -> None:
    ok = projections.tool_result({"a": 1})
    assert ok["structuredContent"] == {"a": 1} and ok["isError"] is False and ok["content"][0]["type"] == "text"
    refused = projections.tool_result(Refusal("refused", "say what to do"))
    assert refused["isError"] is True and "structuredContent" not in refused
    assert refused["_meta"]["majordomus"]["error"]["code"] == "refused"
    statuses = {code: projections.http_result(Refusal(code, "x"))[0]
                for code in ("invalid_input", "forbidden", "not_found", "refused", "internal")}
    assert statuses == {"invalid_input": 400, "forbidden": 403, "not_found": 404, "refused": 422, "internal": 500}


def test_openapi_is_3_1_with_an_operation_per_route() -> None:
    doc = projections.openapi(default_registry(), "0")
    assert doc["openapi"] == "3.1.0"
    operations = {op["operationId"] for path in doc["paths"].values() for op in path.values()}
    assert {"episodes.list", "episodes.attach", "episodes.detach", "peers.list", "peers.announce"} <= operations
    assert doc["paths"]["/api/v1/episodes/attach"]["post"]["x-majordomus-mcp"] == "majordomus_session_attach"


def test_the_committed_reference_page_matches_the_registry() -> None:
    """docs/reference/capabilities.md is generated; regenerate with the command the failure names."""
    page = ROOT / "docs/reference/capabilities.md"
    assert page.read_text(encoding="utf-8") == projections.reference_page(default_registry()), (
        "docs/reference/capabilities.md drifted: run python -m majordomus.capabilities.projections --write-docs")


def test_the_drift_check_command_exits_10_on_a_stale_page(tmp_path: Path) -> None:
    stale = tmp_path / "capabilities.md"
    stale.write_text("# old\n")
    command = [sys.executable, "-m", "majordomus.capabilities.projections"]
    assert subprocess.run([*command, "--check-docs", str(stale)], capture_output=True).returncode == 10
    assert subprocess.run([*command, "--write-docs", str(stale)], capture_output=True).returncode == 0
    assert subprocess.run([*command, "--check-docs", str(stale)], capture_output=True).returncode == 0
