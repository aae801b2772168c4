"""A tool's inputSchema and its handler agree on every `external_id` and `intent`.

The schemas allowed a blank `external_id`/`intent` that the server then refused; now `minLength: 1` and a
`pattern` say exactly what the handler accepts, which a property test checks character by character.
"""

from __future__ import annotations

import jsonschema
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from majordomus.capabilities.catalogue import default_registry
from majordomus.capabilities.episodes import check_external_id
from majordomus.capabilities.registry import Refusal
from majordomus.capabilities.text import WHITESPACE
from majordomus.capabilities.validate import check

REGISTRY = default_registry()
TRICKY = st.sampled_from(list(WHITESPACE) + ["\x00", "\x01", "\x7f", "\ufeff", "\u200b", "a", "é", "/", "\U0001f600"])
TEXT = st.lists(st.one_of(TRICKY, st.characters()), max_size=12).map("".join)


def schema_of(tool: str, argument: str) -> dict[str, object]:
    cap = REGISTRY.by_tool(tool)
    assert cap is not None
    return cap.input_schema["properties"][argument]  # type: ignore[no-any-return]


def test_the_whitespace_list_is_what_str_strip_removes() -> None:
    assert set(WHITESPACE) == {chr(c) for c in range(0x110000) if chr(c).isspace()}


@settings(max_examples=3000, deadline=None, derandomize=True, database=None)
@given(TEXT)
@example("")
@example(" ")
@example("\t\u3000\x85")
@example(" a ")
@example("a\nb")
@example("a\n")
@example("\x1fa")
@example("a\x1f")
@example("a\x85b")
@pytest.mark.slow
def test_external_id_schema_and_handler_agree(value: str) -> None:
    for tool in ("majordomus_session_attach", "majordomus_session_detach", "majordomus_episodes"):
        schema = schema_of(tool, "external_id")
        by_schema = jsonschema.Draft202012Validator(schema).is_valid(value)
        by_server = check(schema, value) is None and not isinstance(check_external_id(value), Refusal)
        assert by_schema == by_server, (tool, value, by_schema, by_server)


@settings(max_examples=3000, deadline=None, derandomize=True, database=None)
@given(TEXT)
@example("")
@example(" \n ")
@example(" plan \n")
@example("a\rb")
@example("a\x01b")
@pytest.mark.slow
def test_intent_schema_and_handler_agree(value: str) -> None:
    schema = schema_of("majordomus_announce", "intent")
    by_schema = jsonschema.Draft202012Validator(schema).is_valid(value)
    stripped = value.strip()
    by_server = check(schema, value) is None and bool(stripped) and "\n" not in stripped and "\r" not in stripped
    assert by_schema == by_server, (value, by_schema, by_server)


def test_an_empty_value_gets_the_handlers_own_sentence() -> None:
    attach = REGISTRY.by_tool("majordomus_session_attach")
    announce = REGISTRY.by_tool("majordomus_announce")
    assert attach is not None and announce is not None
    assert check(attach.input_schema, {"external_id": ""}) == (
        "argument 'external_id' is required and must not be blank: it is what a reconnecting client is recognised by")
    assert check(announce.input_schema, {"intent": ""}) == (
        "argument 'intent' must be one non-blank line: say what you are about to do")
