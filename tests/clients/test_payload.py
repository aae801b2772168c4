"""The one reader of payload fields: a row's key may be dotted to reach a nested field, and anything that is not
there, or not an object on the way, is absent."""

from __future__ import annotations

from majordomus.clients.payload import ABSENT, field, first_scalar
from majordomus.clients.status import _put

NESTED = {"tool_info": {"user_prompt": "from windsurf", "deeper": {"n": 7}}, "trajectory_id": "traj-1",
          "flat.key": "a plain key with a dot is not walked"}


def test_a_dotted_key_follows_nested_objects() -> None:
    assert first_scalar(NESTED, ("tool_info.user_prompt",)) == "from windsurf"
    assert first_scalar(NESTED, ("tool_info.deeper.n",)) == "7"
    assert first_scalar(NESTED, ("missing", "trajectory_id")) == "traj-1"


def test_a_missing_part_or_a_non_object_on_the_way_is_absent() -> None:
    for key in ("tool_info.nope", "trajectory_id.x", "nope.user_prompt", "tool_info.user_prompt.x", "flat.key"):
        assert field(NESTED, key, ABSENT) is ABSENT, key
        assert first_scalar(NESTED, (key,)) is None, key


def test_a_present_null_is_told_from_an_absent_key() -> None:
    data = {"a": {"b": None}, "c": None}
    assert field(data, "a.b", ABSENT) is None and field(data, "c", ABSENT) is None
    assert field(data, "a.x", ABSENT) is ABSENT and field(data, "x", ABSENT) is ABSENT


def test_the_status_self_test_spells_a_dotted_key_as_the_client_would() -> None:
    payload: dict[str, object] = {}
    _put(payload, "userPromptSubmit.prompt", "self-test")
    _put(payload, "taskId", "selftest-1")
    assert payload == {"userPromptSubmit": {"prompt": "self-test"}, "taskId": "selftest-1"}
    assert first_scalar(payload, ("userPromptSubmit.prompt",)) == "self-test"
