"""The hook's stand-in for `json` (majordomus.lean.json) says exactly what `json` says, for every option the hook
path uses."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from majordomus.lean import json as lean_json

scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True),
                    st.text(), st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF,
                                                              categories=None)))  # lone surrogates too
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner,
                                                                                             max_size=4), max_leaves=12)


@settings(max_examples=400, deadline=None)
@given(values)
def test_dumps_is_json_dumps(value: object) -> None:
    for ascii_ in (True, False):
        assert lean_json.dumps(value, ensure_ascii=ascii_) == json.dumps(value, ensure_ascii=ascii_)
        assert (lean_json.dumps(value, ensure_ascii=ascii_, separators=(",", ":"))
                == json.dumps(value, ensure_ascii=ascii_, separators=(",", ":")))


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(), scalars, max_size=8) | st.dictionaries(st.text(), values, max_size=3))
def test_dumps_pretty_is_json_dumps_with_indent_2(members: dict[str, object]) -> None:
    for ascii_ in (True, False):
        assert lean_json.dumps(members, indent=2, ensure_ascii=ascii_) == json.dumps(members, indent=2,
                                                                                 ensure_ascii=ascii_)


@settings(max_examples=400, deadline=None)
@given(values, st.sampled_from(["", " ", "\n", " \t\r\n "]))
@pytest.mark.slow
def test_loads_is_json_loads(value: object, pad: str) -> None:
    text = pad + json.dumps(value) + pad
    assert repr(lean_json.loads(text)) == repr(json.loads(text))  # repr: NaN is not equal to itself


@pytest.mark.parametrize("text", ["", " ", "nope", "{", '{"a": 1} x', '{"a": 1}{}', "\ufeff{}", "[1,]", "'a'",
                                  '"\\ud800', "01", "{\"a\" 1}", "NaN x"])
def test_loads_refuses_what_json_refuses(text: str) -> None:
    import subprocess
    import sys

    # in a fresh interpreter first, where json.decoder is not imported (3.11's scanner needs it for its error)
    probe = "import sys, majordomus.lean.json as j\ntry:\n j.loads(sys.argv[1])\nexcept ValueError as e:\n print(e)"
    fresh = subprocess.run([sys.executable, "-c", probe, text], capture_output=True, text=True)
    with pytest.raises(ValueError) as theirs:
        json.loads(text)
    with pytest.raises(ValueError) as ours:
        lean_json.loads(text)
    assert str(ours.value) == str(theirs.value)
    assert (fresh.returncode, fresh.stdout.strip()) == (0, str(theirs.value))


def test_the_module_imports_neither_json_nor_re() -> None:
    import subprocess
    import sys

    probe = ("import sys, majordomus.lean.json as j; j.loads('{\"a\": [1, 2.5, null]}'); "
             "j.dumps({'a': 1}, indent=2); print(' '.join(m for m in ('json', 're', 'enum') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""
