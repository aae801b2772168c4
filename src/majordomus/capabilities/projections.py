"""Descriptor → MCP tool, MCP tool result, HTTP body, OpenAPI 3.1 document, reference page.

Plain data in, plain data out: no Starlette. A refusal becomes `isError` over MCP in `tool_result`
and an HTTP status in `http_result`, and nowhere else.

    python -m majordomus.capabilities.projections --write-docs [PATH]   regenerate the reference page
    python -m majordomus.capabilities.projections --check-docs [PATH]   exit 10 when it drifted
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from majordomus.capabilities.registry import Capability, JsonObject, Refusal, Registry
from majordomus.encoded_json import EncodedList, compact

REFERENCE_PAGE = Path("docs/reference/capabilities.md")


def tool(cap: Capability) -> JsonObject:
    """The MCP `Tool` of a capability, as `tools/list` announces it."""
    assert cap.tool is not None
    return {
        "name": cap.tool,
        "title": cap.title,
        "description": cap.description,
        "inputSchema": cap.input_schema,
        "outputSchema": cap.output_schema,
        "annotations": cap.hints.as_annotations(cap.title),
        "_meta": {"majordomus": {"id": cap.id, "kind": cap.kind, "effect": cap.effect,
                                 "stability": cap.stability}},
    }


class StructuredText(str):
    """The text content of a tool result: its structuredContent as compact JSON. An encoder that sees it may
    splice it in for the structuredContent instead of encoding the same object twice (a 100-episode listing
    is 30 KB: encoding was a fifth of a busy server's time)."""


def tool_result(outcome: JsonObject | Refusal) -> JsonObject:
    """A `CallToolResult`: structuredContent plus the same JSON as text, or a refusal with its code."""
    if isinstance(outcome, Refusal):
        return {"content": [{"type": "text", "text": outcome.message}], "isError": True,
                "_meta": {"majordomus": {"error": {"code": outcome.code}}}}
    return {"content": [{"type": "text", "text": StructuredText(compact_json(outcome))}], "structuredContent": outcome,
            "isError": False}


def compact_json(outcome: JsonObject) -> str:
    """`json.dumps(outcome, ensure_ascii=False, separators=(",", ":"), allow_nan=False)`, with the JSON that a
    member's `EncodedList` carries spliced in (the board's listing: each heartbeat of 100 peers listed 100 episodes,
    and encoding them again each time was most of what a heartbeat cost)."""
    if not any(isinstance(v, EncodedList) for v in outcome.values()):
        return compact(outcome)
    return "{" + ",".join(f"{compact(k)}:{v.json if isinstance(v, EncodedList) else compact(v)}"
                          for k, v in outcome.items()) + "}"


def http_result(outcome: JsonObject | Refusal) -> tuple[int, JsonObject]:
    """Status and JSON body of an `/api/v1/` call."""
    if isinstance(outcome, Refusal):
        return outcome.http_status, error_body(outcome.code, outcome.message)
    return 200, outcome


def error_body(code: str, message: str) -> JsonObject:
    return {"error": {"code": code, "message": message}}


# -- OpenAPI -------------------------------------------------------------------------------------

ERROR_CODES = ("invalid_input", "unauthorized", "forbidden", "not_found", "timeout", "too_large",
               "unsupported_media_type", "misdirected", "refused", "internal")
_ERROR_SCHEMA: JsonObject = {
    "type": "object",
    "properties": {"error": {"type": "object", "properties": {
        "code": {"type": "string", "enum": list(ERROR_CODES)},
        "message": {"type": "string", "description": "a sentence that says what to do"}},
        "required": ["code", "message"]}},
    "required": ["error"],
}

_STATUS_TEXT = {400: "invalid_input", 403: "forbidden", 404: "not_found", 422: "refused", 500: "internal"}
TOKEN_WHERE = ".ai/local/state/mcp/server.json"
# What the guard in front of every route answers (mcp/http.py), documented on every operation it can reach
_GUARD = {401: f"unauthorized: no `Authorization: Bearer <token>` with the token from {TOKEN_WHERE}",
          403: "forbidden: an Origin that is not this server's own",
          421: "misdirected: a Host that does not name this server"}
_BODY = {408: "timeout: the request did not arrive whole within the read deadline",
         413: "too_large: a body over 4 MiB (Content-Length or counted while read)",
         415: "unsupported_media_type: a body that is not application/json"}


def _error_response(description: str) -> JsonObject:
    return {"description": description,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}


def _guarded(responses: JsonObject, *, token: bool = True, body: bool = False) -> JsonObject:
    for status, text in _GUARD.items():
        if token or status != 401:
            responses.setdefault(str(status), _error_response(text))
    if body:
        for status, text in _BODY.items():
            responses.setdefault(str(status), _error_response(text))
    return dict(sorted(responses.items()))


def operation(cap: Capability) -> JsonObject:
    assert cap.http is not None
    op: JsonObject = {
        "operationId": cap.id,
        "summary": cap.title,
        "description": cap.description,
        "tags": [cap.module],
        "responses": {"200": {"description": "success",
                              "content": {"application/json": {"schema": cap.output_schema}}}},
        "x-majordomus-id": cap.id,
        "x-majordomus-kind": cap.kind,
        "x-majordomus-effect": cap.effect,
        "x-majordomus-stability": cap.stability,
        "x-majordomus-mcp": cap.tool,
    }
    for status, code in _STATUS_TEXT.items():
        op["responses"][str(status)] = _error_response(code)
    if cap.http.method == "GET":
        op["parameters"] = [{"name": name, "in": "query", "required": name in cap.input_schema.get("required", []),
                             "schema": schema} for name, schema in cap.input_schema.get("properties", {}).items()]
    else:
        op["requestBody"] = {"required": True, "content": {"application/json": {"schema": cap.input_schema}}}
    op["responses"] = _guarded(op["responses"], body=cap.http.method != "GET")
    return op


def openapi(registry: Registry, version: str, server_url: str | None = None) -> JsonObject:
    """The OpenAPI 3.1 document of every HTTP-exposed capability plus the health routes."""
    paths: dict[str, JsonObject] = {}
    for cap in registry.routes():
        assert cap.http is not None
        paths.setdefault(cap.http.path, {})[cap.http.method.lower()] = operation(cap)
    ok = {"application/json": {"schema": {"type": "object"}}}
    paths["/api/v1/live"] = {"get": {
        "operationId": "live", "summary": "The server process answers", "tags": ["health"],
        "description": "The one route without the token: a bridge probes it (the `lease` digest proves which "
                       "server answers) before it sends the token anywhere.",
        "security": [], "responses": _guarded({"200": {"description": "ok", "content": ok}}, token=False)}}
    paths["/api/v1/ready"] = {"get": {
        "operationId": "ready", "summary": "The server is ready to serve this repository", "tags": ["health"],
        "responses": _guarded({"200": {"description": "ok", "content": ok},
                               "503": {"description": "stopping", "content": ok}})}}
    doc: JsonObject = {
        "openapi": "3.1.0",
        "info": {"title": "majordomus", "version": version,
                 "description": "The shared MCP server of one repository: every capability as an HTTP route. "
                                "The same capabilities are MCP tools at /mcp. Every route but /api/v1/live needs "
                                f"the repository owner's token (`Authorization: Bearer …`, from {TOKEN_WHERE})."},
        "tags": [{"name": name} for name in dict.fromkeys([c.module for c in registry.routes()] + ["health"])],
        "paths": paths,
        "components": {"schemas": {"Error": _ERROR_SCHEMA},
                       "securitySchemes": {"bearer": {
                           "type": "http", "scheme": "bearer",
                           "description": f"the `token` of the lease {TOKEN_WHERE} (0600: the owner's only; each "
                                          "elected server writes a new one)"}}},
        "security": [{"bearer": []}],
    }
    if server_url:
        doc["servers"] = [{"url": server_url}]
    return doc


# -- the reference page --------------------------------------------------------------------------

def reference_page(registry: Registry) -> str:
    """docs/reference/capabilities.md: generated, never edited by hand (a test checks for drift)."""
    out = ["# Capabilities", "",
           "<!-- Generated from the capability registry by "
           "`python -m majordomus.capabilities.projections --write-docs`; do not edit. -->", "",
           "Each capability is declared once and served as an MCP tool (at `/mcp`, or over stdio) and as an HTTP "
           "route under `/api/v1/` (OpenAPI 3.1 at `/openapi.json`, Swagger UI at `/swagger`).", "",
           "| id | kind | MCP tool | HTTP | stability |", "|---|---|---|---|---|"]
    for cap in registry:
        route = f"`{cap.http.method} {cap.http.path}`" if cap.http else "none"
        out.append(f"| `{cap.id}` | {cap.kind} | `{cap.tool}` | {route} | {cap.stability} |")
    for cap in registry:
        out += ["", f"## `{cap.id}` — {cap.title}", "", cap.description, "",
                f"- kind: {cap.kind}; effect: {cap.effect}; stability: {cap.stability}",
                f"- MCP tool: `{cap.tool}`; annotations: " +
                ", ".join(f"{k} {str(v).lower()}" for k, v in cap.hints.as_annotations(cap.title).items()
                          if k != "title"),
                f"- HTTP: `{cap.http.method} {cap.http.path}`" if cap.http else "- HTTP: none",
                f"- tags: {', '.join(cap.tags) or 'none'}"]
        if cap.errors:
            out += ["", "Errors (HTTP status / MCP `_meta.majordomus.error.code`):", ""]
            out += [f"- {code} ({_status(code)}): {message}" for code, message in cap.errors]
        out += ["", "Input schema:", "", "```json", json.dumps(cap.input_schema, indent=2), "```",
                "", "Output schema:", "", "```json", json.dumps(cap.output_schema, indent=2), "```"]
    return "\n".join(out) + "\n"


def _status(code: str) -> int:
    return {v: k for k, v in _STATUS_TEXT.items()}[code]


def main(argv: list[str]) -> int:
    from majordomus.capabilities.catalogue import default_registry

    if len(argv) not in (1, 2) or argv[0] not in ("--write-docs", "--check-docs"):
        print("usage: python -m majordomus.capabilities.projections --write-docs|--check-docs [PATH]", file=sys.stderr)
        return 2
    path = Path(argv[1]) if len(argv) == 2 else REFERENCE_PAGE
    page = reference_page(default_registry())
    if argv[0] == "--write-docs":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(page, encoding="utf-8")
        print(f"wrote {path}", file=sys.stderr)
        return 0
    current = path.read_text(encoding="utf-8") if path.is_file() else ""
    if current != page:
        print(f"majordomus: {path} differs from the capability registry; run python -m "
              "majordomus.capabilities.projections --write-docs", file=sys.stderr)
        return 10
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

