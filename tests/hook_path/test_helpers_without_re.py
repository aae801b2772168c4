"""The hook path's helpers do without `re` (importing it is start-up time every hook pays); each one still says
exactly what its regular expression said.

The reference for each is the expression the helper used before (main at dd17aba), run here with `re`.
"""

from __future__ import annotations

import json
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from majordomus import identity, simple_yaml
from majordomus.archive import record, render

# the characters every rule below is about, and any others
ODD = "`-._/\\\"' \t\n\r\x00\x01\x0b\x0c\x1f\x7f\x80\x85\x9f\xa0\u2028\u2029\ud800\udbff\udc00\udfff\ufffe\uffffé日😀"
texts = st.text(alphabet=st.sampled_from(list(ODD) + list("aZ09")), max_size=90) | st.text(max_size=90)


@settings(max_examples=600, deadline=None)
@given(texts)
def test_slug_is_the_regex_slug(text: str) -> None:
    head = text[:72].translate(record._ASCII_LOWER)
    expected = re.sub(r"[^a-z0-9]+", "-", head).strip("-")[:record.SLUG_MAX].rstrip("-") or "prompt"
    assert record.slug(text) == expected


@settings(max_examples=600, deadline=None)
@given(texts)
def test_name_key_is_the_regex_name_key(text: str) -> None:
    assert identity.name_key(text) == (re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.")[:64] or "none")


@settings(max_examples=600, deadline=None)
@given(texts)
def test_odd_characters_and_backtick_runs_are_the_regex_ones(text: str) -> None:
    ascii_odd = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
    odd = "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff\ufffe\uffff]"
    expected = ascii_odd.search(text) is not None if text.isascii() else re.search(odd, text) is not None
    assert render._has_odd(text) == expected
    assert render._longest_backticks(text) == max((len(m.group()) for m in re.finditer("`+", text)), default=0)


@settings(max_examples=600, deadline=None)
@given(texts | st.none() | st.integers() | st.floats())
def test_yaml_scalar_is_the_regex_yaml_scalar(value: object) -> None:
    text = json.dumps(value, ensure_ascii=False)
    if isinstance(value, str) and not (value.isascii() and "\x7f" not in value):
        text = re.sub("[\x7f-\x9f\u2028\u2029\ud800-\udfff\ufffe\uffff]", lambda m: f"\\u{ord(m.group()):04x}", text)
    assert simple_yaml.yaml_scalar(value) == text


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("0123456789abcdefABX-.json ")), max_size=30))
def test_record_names_and_shas_are_the_regex_ones(text: str) -> None:
    match = re.fullmatch(r"(?P<stamp>[0-9]{14})-(?P<slug>[a-z0-9-]*)\.json", text)
    assert record.name_stamp(text) == (match.group("stamp") if match else None)
    for candidate in (text, "20261203080000-" + text + ".json", (text * 40)[:40]):
        match = re.fullmatch(r"(?P<stamp>[0-9]{14})-(?P<slug>[a-z0-9-]*)\.json", candidate)
        assert record.name_stamp(candidate) == (match.group("stamp") if match else None)
        assert identity.is_sha(candidate) == bool(re.fullmatch(r"[0-9a-f]{40}", candidate))


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.sampled_from(list('[]remot "ign\t\u3000x')), max_size=24))
def test_the_origin_section_is_the_regex_one(text: str) -> None:
    for line in (text, f"[remote{text}\"origin\"]", '[remote "origin"]', '[remote\t"origin"]'):
        assert identity._is_origin_section(line) == bool(re.fullmatch(r'\[remote\s+"origin"\]', line))
