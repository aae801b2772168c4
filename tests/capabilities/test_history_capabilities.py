"""The recorded history as capabilities of the registry — `majordomus_history_episodes`, `_show`,
`_commit`, `_search` over MCP (a real `majordomus-mcp` on stdio, and the official SDK) and as REST routes of a
real shared server on loopback — answering what `majordomus episodes|show|search --json` print, for a history
drawn by the real hook commands; behind the owner's token, with prompt texts withheld unless asked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
import httpx
import jsonschema
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from conftest import RunMajordomus
from history.test_episodes_show_search import World
from majordomus.capabilities.text import WHITESPACE
from mcp_support import (
    INITIALIZED,
    MAJORDOMUS_MCP,
    McpProcess,
    auth,
    call,
    initialize,
    modern,
    modern_headers,
    run_mcp,
)
from support import unique_prefix

TOOLS = {"majordomus_history_episodes": "/api/v1/history/episodes", "majordomus_history_show": "/api/v1/history/show",
         "majordomus_history_commit": "/api/v1/history/commit", "majordomus_history_search": "/api/v1/history/search"}
SECRET_WORDS = ("tokenizer", "ledger rotation", "write the tests")  # words of the prompts drawn below


@pytest.fixture(name="world")
def _world(initialised_repo: Path, run_majordomus: RunMajordomus) -> World:
    return World(initialised_repo, run_majordomus)


@pytest.fixture(name="history")
def _history(world: World) -> dict[str, str]:
    """As in history/test_episodes_show_search.py: an interrupted Claude episode (two prompts, one redacted, a
    commit), an interrupted Codex one (a prompt, a commit), and an open Claude one."""
    ids = {"claude": world.start("claude-1")}
    world.prompt("claude-1", "rotate the api_key = 'Zx81kd02kdkLLqw0ss9' and fix the tokenizer")
    ids["commit"] = world.commit("parser.py", "teach the parser unicode")
    world.prompt("claude-1", "now write the tests for the tokenizer, please")
    world.end("claude-1", "other")
    ids["codex"] = world.start("codex-1", "codex")
    world.prompt("codex-1", "explain the ledger rotation", "codex")
    ids["codex_commit"] = world.commit("ledger.md", "document the ledger")
    world.end("codex-1", "other", "codex")
    ids["open"] = world.start("claude-2")
    return ids


def steady(data: Any) -> Any:
    """The answer without what moves with the clock: an open episode's duration so far."""
    if isinstance(data, dict):
        return {k: steady(v) for k, v in data.items()
                if not (k == "duration_seconds" and data.get("state") in ("open", "detached"))}
    if isinstance(data, list):
        return [steady(v) for v in data]
    return data


def cli_json(world: World, *args: str) -> Any:
    return steady(world.json(*args))


def tool_calls(history: dict[str, str]) -> list[tuple[str, dict[str, Any], tuple[str, ...]]]:
    """(tool, arguments, the command line whose --json is the same answer)."""
    prefix = unique_prefix(history["claude"], [history["codex"], history["open"]])
    return [
        ("majordomus_history_episodes", {}, ("episodes",)),
        ("majordomus_history_episodes", {"outcome": "interrupted", "provider": "codex"},
         ("episodes", "--outcome", "interrupted", "--provider", "codex")),
        ("majordomus_history_episodes", {"open": True}, ("episodes", "--open")),
        ("majordomus_history_episodes", {"since": "2999-01-01T00:00:00Z", "until": "2000-01-01T00:00:00Z"},
         ("episodes", "--until", "2000-01-01T00:00:00Z")),  # an empty window is empty, as the schema admits it
        ("majordomus_history_episodes", {"branch": "main", "limit": 2, "since": "2000-01-01T00:00:00Z"},
         ("episodes", "--branch", "main", "-n", "2", "--since", "2000-01-01T00:00:00Z")),
        ("majordomus_history_show", {"episode": prefix, "with_prompts": True}, ("show", prefix)),
        ("majordomus_history_show", {"episode": history["codex"], "with_prompts": True}, ("show", history["codex"])),
        ("majordomus_history_commit", {"commit": history["commit"][:10]}, ("show", history["commit"][:10])),
        ("majordomus_history_search", {"query": "tokenizer"}, ("search", "tokenizer")),
        ("majordomus_history_search", {"query": "tokenizer", "limit": 1, "outcome": "interrupted"},
         ("search", "tokenizer", "-n", "1", "--outcome", "interrupted")),
        ("majordomus_history_search", {"query": "ledger", "provider": "claude-code"},
         ("search", "ledger", "--provider", "claude-code")),
    ]


# -- MCP over stdio ---------------------------------------------------------------------------------------------
def test_stdio_lists_the_history_tools_and_answers_what_the_commands_print(world: World, history: dict[str, str]
                                                                            ) -> None:
    calls = tool_calls(history)
    frames = [initialize(), INITIALIZED, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}]
    frames += [call(10 + n, tool, args) for n, (tool, args, _) in enumerate(calls)]
    code, out, err = run_mcp(world.repo, frames, "--standalone")
    assert code == 0, err
    by_id = {f.get("id"): f for f in out}
    tools = {t["name"]: t for t in by_id[2]["result"]["tools"]}
    assert set(TOOLS) <= set(tools)
    for name in TOOLS:
        tool = tools[name]
        jsonschema.Draft202012Validator.check_schema(tool["outputSchema"])
        jsonschema.Draft202012Validator.check_schema(tool["inputSchema"])
        assert tool["annotations"]["readOnlyHint"] is True and tool["outputSchema"]["additionalProperties"] is False
    for n, (tool, args, argv) in enumerate(calls):
        result = by_id[10 + n]["result"]
        assert result["isError"] is False, (tool, args, result)
        jsonschema.validate(result["structuredContent"], tools[tool]["outputSchema"])
        assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
        assert steady(result["structuredContent"]) == cli_json(world, *argv), (tool, args)


def test_show_withholds_prompt_texts_unless_asked(world: World, history: dict[str, str]) -> None:
    code, out, err = run_mcp(world.repo, [initialize(), INITIALIZED,
                                          call(2, "majordomus_history_show", {"episode": history["claude"]}),
                                          call(3, "majordomus_history_show", {"episode": history["claude"],
                                                                              "with_prompts": False})], "--standalone")
    assert code == 0, err
    shown = cli_json(world, "show", history["claude"])
    for frame in out[1:]:
        data = frame["result"]["structuredContent"]
        assert [p["text"] for p in data["prompts"]] == [None, None]
        assert all(p["text_withheld"] is True for p in data["prompts"])
        assert not any(word in json.dumps(data) for word in SECRET_WORDS)
        # everything else is the command's answer
        for p in data["prompts"]:
            del p["text_withheld"]
        assert steady(data) | {"prompts": []} == shown | {"prompts": []}
        assert [p["redacted"] for p in data["prompts"]] == ["assignment", None]


def test_a_withheld_prompt_withholds_the_slug_of_its_record_name_too(world: World, history: dict[str, str]) -> None:
    """A record's file name is its capture stamp and the opening of its text: withheld, only the stamp is left."""
    slug = "now-write-the-tests-for-the-tokenizer"
    assert slug in json.dumps(world.json("show", history["claude"]))  # the owner's own command shows it
    for argv in (("export", "--format", "json"), ("export",), ("export", "--format", "html")):
        out = world.text(*argv)
        assert slug not in out and "write the tests" not in out, argv
    names = [p["record"] for p in world.json("export")["episodes"][-1]["prompts"]]
    assert len(names) == 2 and all(n.endswith("-….json") and n[:14].isdigit() for n in names)
    full = world.json("export", "--with-prompts")["episodes"][-1]["prompts"]
    assert any(slug in p["record"] for p in full)


@pytest.mark.parametrize(("tool", "args", "code", "says"), [
    ("majordomus_history_show", {"episode": "s-"}, "invalid_input", "'s-' is ambiguous: it names 3 episode(s): s-"),
    ("majordomus_history_show", {"episode": "s-1999"}, "not_found", "no episode id starts with 's-1999'"),
    ("majordomus_history_commit", {"commit": "deadbeefdeadbeef"}, "not_found", "is not a commit of this repository"),
    ("majordomus_history_search", {"query": "   "}, "invalid_input", "must be one non-blank line"),
    ("majordomus_history_episodes", {"since": "yesterday"}, "invalid_input", "must be an RFC 3339 time"),
    ("majordomus_history_episodes", {"since": "2026-02-30T00:00:00Z"}, "invalid_input", "names no day there is"),
    ("majordomus_history_episodes", {"limit": 0}, "invalid_input", "argument 'limit' must be at least 1"),
    ("majordomus_history_episodes", {"outcome": "lost"}, "invalid_input", "must be one of closed, interrupted"),
    ("majordomus_history_episodes", {"color": "red"}, "invalid_input", "unknown argument 'color'"),
])
def test_bad_arguments_are_refused_with_a_sentence(world: World, history: dict[str, str], tool: str,
                                                   args: dict[str, Any], code: str, says: str) -> None:
    done, out, err = run_mcp(world.repo, [initialize(), INITIALIZED, call(2, tool, args)], "--standalone")
    assert done == 0, err
    result = out[1]["result"]
    assert result["isError"] is True and result["_meta"]["majordomus"]["error"]["code"] == code
    text = result["content"][0]["text"]
    assert says in text and "Traceback" not in text and "\n" not in text, text
    if args.get("episode") == "s-":
        for key in ("open", "codex", "claude"):
            assert history[key] in text


def test_a_query_fts5_cannot_parse_is_searched_literally_and_said_so(world: World, history: dict[str, str]) -> None:
    """No schema can state FTS5's grammar, so what the schema admits is answered: `api-key` (FTS5 reads `-` as an
    operator) is searched as the literal words, the answer's `query` says what ran and `note` why."""
    world.prompt("claude-2", "rotate the api-key before the release")
    code, out, err = run_mcp(world.repo, [initialize(), INITIALIZED,
                                          call(2, "majordomus_history_search", {"query": "api-key", "syntax": "words"}),
                                          call(3, "majordomus_history_search", {"query": '"api-key"'}),
                                          call(4, "majordomus_history_search", {"query": "api-key"}),
                                          call(5, "majordomus_history_search", {"query": "(x"})], "--standalone")
    assert code == 0, err
    literal, quoted, fallen, nothing = (f["result"]["structuredContent"] for f in out[1:])
    assert literal["query"] == '"api-key"'  # the phrase "api key": this prompt, and the redacted "api_key = …"
    assert {r["episode"] for r in literal["results"]} == {history["open"], history["claude"]}
    assert steady(quoted) == cli_json(world, "search", '"api-key"') == steady(literal)
    assert "note" not in literal and "note" not in quoted
    assert fallen["query"] == '"api-key"' and fallen["results"] == literal["results"]
    assert fallen["note"].startswith("the search index cannot parse the query 'api-key'")
    assert "must be inside double quotes" in fallen["note"]
    assert fallen["note"].endswith('searched for the literal words instead: "api-key"')
    assert nothing["query"] == '"(x"' and nothing["count"] == 0 and "note" in nothing
    done = world.run("search", "api-key", cwd=world.repo)  # the command stays strict: a person retypes
    assert done.returncode == 2 and b"must be inside double quotes" in done.stderr


def test_the_sdk_client_lists_and_calls_the_history_tools(world: World, history: dict[str, str]) -> None:
    client_class = pytest.importorskip("mcp.client").Client
    params_class = pytest.importorskip("mcp.client.stdio").StdioServerParameters
    params = params_class(command=str(MAJORDOMUS_MCP), args=["--standalone"], cwd=str(world.repo),
                          env=dict(os.environ))
    answers: dict[str, Any] = {}

    async def main() -> None:
        async with client_class(params, mode="legacy", client_info=None) as client:
            schemas = {t.name: t.output_schema for t in (await client.list_tools()).tools}
            assert set(TOOLS) <= set(schemas)
            for tool, args in (("majordomus_history_episodes", {"outcome": "interrupted"}),
                               ("majordomus_history_search", {"query": "ledger"}),
                               ("majordomus_history_show", {"episode": history["open"]})):
                result = await client.call_tool(tool, args)
                assert result.is_error is False, result
                jsonschema.validate(result.structured_content, schemas[tool])
                answers[tool] = result.structured_content

    anyio.run(main)
    assert steady(answers["majordomus_history_episodes"]) == cli_json(world, "episodes", "--outcome", "interrupted")
    assert steady(answers["majordomus_history_search"]) == cli_json(world, "search", "ledger")
    assert answers["majordomus_history_show"]["episode"]["state"] == "open"


# -- REST on a real shared server --------------------------------------------------------------------------------
def rest_path(tool: str, args: dict[str, Any]) -> str:
    def spelled(v: Any) -> str:
        return ("true" if v else "false") if isinstance(v, bool) else str(v)

    query = "&".join(f"{k}={quote(spelled(v), safe='')}" for k, v in args.items())
    return TOOLS[tool] + (f"?{query}" if query else "")


def test_rest_routes_answer_the_same_shapes_with_the_token(world: World, history: dict[str, str]) -> None:
    with McpProcess(world.repo, "--http-port", "0") as server:
        url = server.url()
        server.request(initialize("owner"))
        owner = auth(world.repo)
        with httpx.Client(base_url=url, headers=owner, timeout=30) as client:
            spec = client.get("/openapi.json").json()
            for tool, args, argv in tool_calls(history):
                path = rest_path(tool, args)
                response = client.get(path)
                assert response.status_code == 200, (path, response.text)
                schema = spec["paths"][TOOLS[tool]]["get"]["responses"]["200"]["content"]["application/json"]
                jsonschema.validate(response.json(), schema["schema"])
                assert steady(response.json()) == cli_json(world, *argv), path
            withheld = client.get(rest_path("majordomus_history_show", {"episode": history["claude"]})).json()
            assert [p["text"] for p in withheld["prompts"]] == [None, None]
            bad = {"/api/v1/history/episodes?limit=abc": "argument 'limit' must be an integer",
                   "/api/v1/history/episodes?limit=10001": "must be at most 10000",
                   "/api/v1/history/episodes?open=yes": "argument 'open' must be a boolean",
                   "/api/v1/history/commit?commit=HEAD%00x": "without control characters",
                   "/api/v1/history/search": "argument 'query' is required",
                   f"/api/v1/history/show?episode={history['claude']}&with_prompts=1": "must be a boolean"}
            for path, says in bad.items():
                response = client.get(path)
                assert response.status_code == 400, (path, response.text)
                assert says in response.json()["error"]["message"], (path, response.text)
            assert client.get("/api/v1/history/show?episode=s-1999").status_code == 404
            # the same tool over /mcp (a 2026-07-28 request: no session), served off the event loop
            message = modern(7, "tools/call", {"name": "majordomus_history_search", "arguments": {"query": "ledger"}})
            over_mcp = client.post("/mcp", json=message, headers=modern_headers(message))
            assert over_mcp.status_code == 200, over_mcp.text
            assert steady(over_mcp.json()["result"]["structuredContent"]) == cli_json(world, "search", "ledger")
        server.close_stdin()
        assert server.wait() == 0
    assert "Traceback" not in server.stderr


def test_without_the_token_the_history_answers_401_and_no_prompt_text(world: World, history: dict[str, str]
                                                                      ) -> None:
    """Another local user (no token, a wrong one) asks every history route and /mcp for the prompts: 401, and not
    a word of them in any answer."""
    with McpProcess(world.repo, "--http-port", "0") as server:
        url = server.url()
        server.request(initialize("owner"))
        secret = auth(world.repo)["Authorization"].removeprefix("Bearer ")
        paths = [rest_path(t, a) for t, a, _ in tool_calls(history)]
        paths.append(rest_path("majordomus_history_show", {"episode": history["claude"], "with_prompts": True}))
        rpc = [initialize("stranger"), call(2, "majordomus_history_show", {"episode": history["claude"],
                                                                           "with_prompts": True}),
               call(3, "majordomus_history_search", {"query": "tokenizer"})]
        for headers in ({}, {"Authorization": f"Bearer {'A' * len(secret)}"}, {"Authorization": f"Basic {secret}"}):
            with httpx.Client(base_url=url, headers=headers, timeout=30) as client:
                answers = [client.get(p) for p in paths]
                answers += [client.post("/mcp", json=m, headers={"Accept": "application/json, text/event-stream"})
                            for m in rpc]
            for response in answers:
                assert response.status_code == 401, (response.request.url, response.text)
                assert response.json()["error"]["code"] == "unauthorized"
                assert not any(word in response.text for word in SECRET_WORDS + ("Zx81", "unicode")), response.text
        with httpx.Client(base_url=url, headers=auth(world.repo), timeout=30) as client:  # the owner's does
            shown = client.get(paths[-1]).json()
            assert "now write the tests for the tokenizer, please" in [p["text"] for p in shown["prompts"]]
        server.close_stdin()
        assert server.wait() == 0


# -- start-up ---------------------------------------------------------------------------------------------------
def test_the_server_starts_without_sqlite3_and_loads_it_only_when_asked(tmp_path: Path) -> None:
    probe = ("import json, sys; import majordomus.mcp.server, majordomus.mcp.runtime, majordomus.mcp.http; "
             "from majordomus.capabilities.catalogue import default_registry; r = default_registry(); "
             "before = 'sqlite3' in sys.modules; "
             "from majordomus.capabilities.registry import Services, Caller, invoke; "
             "from majordomus.layout import Layout; from pathlib import Path; "
             "out = invoke(r.get('history.search'), Services(None, None, Layout(Path(sys.argv[1]))), "
             "Caller(via='mcp'), {'query': 'x'}); "
             "print(json.dumps([before, 'sqlite3' in sys.modules, out.message]))")
    done = subprocess.run([sys.executable, "-c", probe, str(tmp_path)], capture_output=True, text=True, check=True)
    before, after, said = json.loads(done.stdout)
    assert before is False and after is True  # the handler imported it, start-up did not
    assert said.endswith("has no majordomus layer; run majordomus init")


# -- the library underneath --------------------------------------------------------------------------------------
@settings(max_examples=600, deadline=None, derandomize=True, database=None)
@given(st.lists(st.one_of(st.sampled_from(list(WHITESPACE) + ["\x00", "\x1f", "\x7f", "a", "é", "-", '"']),
                          st.characters()), max_size=10).map("".join))
@example("")
@example(" s-2026 ")
@example("a\n")
@example("a\x85")
@example("HEAD\x00x")
def test_each_name_argument_is_refused_by_the_schema_exactly_when_the_handler_refuses_it(value: str) -> None:
    from majordomus.capabilities.catalogue import default_registry
    from majordomus.capabilities.history import _text
    from majordomus.capabilities.registry import Refusal
    from majordomus.capabilities.validate import check

    registry = default_registry()
    for tool, name in (("majordomus_history_show", "episode"), ("majordomus_history_commit", "commit"),
                       ("majordomus_history_search", "query")):
        cap = registry.by_tool(tool)
        assert cap is not None
        schema = cap.input_schema["properties"][name]
        by_schema = jsonschema.Draft202012Validator(schema).is_valid(value)
        by_server = check(schema, value) is None and not isinstance(_text({name: value}, name), Refusal)
        assert by_schema == by_server, (tool, value, by_schema, by_server)


@pytest.mark.parametrize(("raw", "utc"), [
    ("2026-12-02T08:00:00Z", "2026-12-02T08:00:00Z"), ("2026-12-02t08:00:00.123456z", "2026-12-02T08:00:00Z"),
    ("2026-12-02T10:30:00+02:30", "2026-12-02T08:00:00Z"), ("2026-12-31T23:59:60Z", "2026-12-31T23:59:59Z"),
    ("0001-01-01T00:00:00+01:00", "0000-01-01T00:00:00Z"), ("9999-12-31T23:59:59-01:00", "9999-12-31T23:59:59Z"),
    ("0000-01-01T00:00:00Z", "0000-01-01T00:00:00Z"), ("0040-02-01T00:31:00+19:48", "0040-01-31T04:43:00Z"),
])
def test_every_rfc3339_time_the_schema_admits_is_read(raw: str, utc: str) -> None:
    from majordomus.capabilities.history import utc_moment

    assert utc_moment(raw, "since") == utc
