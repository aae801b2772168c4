"""Property: `update` on a policy PyYAML reads as valid either adds the missing keys, so that PyYAML reads every
value the person declared unchanged and every comment is still there, or refuses in one sentence with the file
byte-identical.

Generated: a subset of the real keys with valid values, block or flow style per section (or a flow document),
indents of 2 and 4, full-line and trailing comments, plain, single- and double-quoted keys, an optional `---`, an
empty section, CRLF line breaks, no trailing newline — through the library for many files, and through the real
`majordomus update` for a few.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from majordomus.errors import MajordomusError
from majordomus.layer import converge
from majordomus.layout import Layout
from majordomus.policy import DEFAULTS, MAXIMA, validate_raw
from support import MAJORDOMUS

POLICY = ".ai/repo/policy.yaml"
SECTIONS: dict[str, list[str]] = {}
for _dotted in DEFAULTS:
    SECTIONS.setdefault(_dotted.split(".", 1)[0], []).append(_dotted.split(".", 1)[1])


def quoted(name: str, how: str) -> str:
    return {"plain": name, "single": f"'{name}'", "double": f'"{name}"'}[how]


@st.composite
def policies(draw: st.DrawFn) -> tuple[str, dict[str, dict[str, int] | None], list[str]]:
    """(the file's text, what it declares by section (None: an empty section), the comments it holds)."""
    sections = draw(st.lists(st.sampled_from(sorted(SECTIONS)), unique=True, max_size=4))
    indent = " " * draw(st.sampled_from([2, 4]))
    quoting = st.sampled_from(["plain", "single", "double"])
    comments: list[str] = []

    def comment() -> str:
        text = f"note {len(comments)} {draw(st.sampled_from(['kept', 'mine', 'do not touch']))}"
        comments.append(text)
        return f"# {text}"

    declared: dict[str, dict[str, int] | None] = {}
    flow_document = draw(st.booleans()) and bool(sections)
    for section in sections:
        keys = draw(st.lists(st.sampled_from(SECTIONS[section]), unique=True, max_size=len(SECTIONS[section])))
        declared[section] = {k: draw(st.integers(1, min(MAXIMA[f"{section}.{k}"], 10**7))) for k in keys}
    if flow_document:
        body = ", ".join(
            f"{quoted(s, draw(quoting))}: {{{', '.join(f'{quoted(k, draw(quoting))}: {v}' for k, v in ks.items())}}}"
            for s, ks in declared.items() if ks is not None)
        lines = [comment(), "{" + body + "}" + (f"  {comment()}" if draw(st.booleans()) else "")]
    else:
        lines = [comment()] if draw(st.booleans()) else []
        for section, keys in declared.items():
            if draw(st.booleans()):
                lines.append(comment())
            name = quoted(section, draw(quoting))
            assert keys is not None
            if not keys and draw(st.booleans()):
                declared[section] = None  # `section:` and nothing under it
                lines.append(f"{name}:")
            elif draw(st.booleans()):  # flow
                pairs = ", ".join(f"{quoted(k, draw(quoting))}: {v}" for k, v in keys.items())
                lines.append(f"{name}: {{{pairs}}}" + (f"  {comment()}" if draw(st.booleans()) else ""))
            else:
                if not keys:
                    lines.append(f"{name}: {{}}")
                    continue
                lines.append(f"{name}:" + (f"  {comment()}" if draw(st.booleans()) else ""))
                for key, number in keys.items():
                    if draw(st.booleans()):
                        lines.append(f"{indent}{comment()}")
                    trail = f" {comment()}" if draw(st.booleans()) else ""
                    lines.append(f"{indent}{quoted(key, draw(quoting))}: {number}{trail}")
        if draw(st.booleans()):
            lines.append(comment())
    if draw(st.booleans()):
        lines.insert(0, "---")
    newline = "\r\n" if draw(st.booleans()) else "\n"
    text = newline.join(lines) + (newline if draw(st.booleans()) else "")
    return text, declared, comments


def assert_kept_or_refused(before: bytes, after: bytes, declared: dict[str, dict[str, int] | None],
                           comments: list[str], refusal: str | None) -> None:
    if refusal is not None:
        assert after == before, "a refusal must leave the file byte-identical"
        assert refusal.startswith("majordomus: ") and "\n" not in refusal.strip(), refusal
        return
    parsed = yaml.safe_load(after.decode("utf-8"))
    assert isinstance(parsed, dict)
    for section, keys in declared.items():
        for key, number in (keys or {}).items():
            assert parsed[section][key] == number and type(parsed[section][key]) is int, (section, key, after)
    text = after.decode("utf-8")
    for note in comments:
        assert note in text, (note, after)
    checked = validate_raw(parsed, Path(POLICY))
    assert checked.problems == () and checked.declared == frozenset(DEFAULTS), after
    if b"\r\n" in before:
        assert b"\n" not in after.replace(b"\r\n", b""), "a CRLF policy keeps CRLF line breaks"


def layer_at(root: Path, text: bytes) -> Layout:
    (root / ".ai/repo").mkdir(parents=True)
    (root / ".ai/local").mkdir(parents=True)
    (root / POLICY).write_bytes(text)
    return Layout(root)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(policies())
@pytest.mark.slow
def test_update_keeps_every_declared_value_and_comment_or_refuses_byte_identical(
        case: tuple[str, dict[str, dict[str, int] | None], list[str]]) -> None:
    check_library(case)


@settings(max_examples=40, deadline=None)
@given(policies())
def test_update_keeps_a_generated_policy_or_refuses_byte_identical(
        case: tuple[str, dict[str, dict[str, int] | None], list[str]]) -> None:
    check_library(case)


def check_library(case: tuple[str, dict[str, dict[str, int] | None], list[str]]) -> None:
    text, declared, comments = case
    raw = text.encode("utf-8")
    with tempfile.TemporaryDirectory() as tmp:
        layout = layer_at(Path(tmp), raw)
        refusal = None
        try:
            converge(layout)
        except MajordomusError as exc:
            refusal = exc.line()
        assert_kept_or_refused(raw, layout.policy_file.read_bytes(), declared, comments, refusal)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                HealthCheck.function_scoped_fixture])
@given(policies())
def test_the_real_update_keeps_a_generated_policy_or_refuses_byte_identical(
        initialised_repo: Path, case: tuple[str, dict[str, dict[str, int] | None], list[str]]) -> None:
    text, declared, comments = case
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        shutil.copytree(initialised_repo, repo, symlinks=True)
        (repo / POLICY).write_bytes(text.encode("utf-8"))
        done = subprocess.run([str(MAJORDOMUS), "update"], cwd=repo, capture_output=True, timeout=60)
        assert done.returncode in (0, 15), done.stderr
        refusal = done.stderr.decode() if done.returncode else None
        assert_kept_or_refused(text.encode("utf-8"), (repo / POLICY).read_bytes(), declared, comments, refusal)


def update(repo: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([str(MAJORDOMUS), "update"], cwd=repo, capture_output=True, timeout=60)


def test_update_adds_inside_a_flow_section_and_keeps_its_value(initialised_repo: Path) -> None:
    """A flow-style `prompts: {retention_max_days: 5}` once gained a second `prompts:` block, and the person's
    5 days silently became 90."""
    policy = initialised_repo / POLICY
    policy.write_text("prompts: {retention_max_days: 5}\n")
    done = update(initialised_repo)
    assert done.returncode == 0, done.stderr
    text = policy.read_text()
    assert text.startswith("prompts: {retention_max_days: 5, retention_max_bytes: 52428800}\n")
    assert text.count("prompts") == 1 and yaml.safe_load(text)["prompts"]["retention_max_days"] == 5


def test_update_on_a_four_space_policy_writes_one_that_parses(initialised_repo: Path) -> None:
    """A policy indented by four spaces was rewritten into a file that no longer parsed (update exited 10 after
    writing it, and prune then refused)."""
    policy = initialised_repo / POLICY
    policy.write_text("prompts:\n    retention_max_days: 5\n")
    done = update(initialised_repo)
    assert done.returncode == 0, done.stderr
    text = policy.read_text()
    assert text.startswith("prompts:\n    retention_max_days: 5\n    retention_max_bytes: 52428800\n")
    assert yaml.safe_load(text)["prompts"] == {"retention_max_days": 5, "retention_max_bytes": 52428800}
    prune = subprocess.run([str(MAJORDOMUS), "capture", "prune", "--dry-run"], cwd=initialised_repo,
                           capture_output=True, timeout=60)
    assert prune.returncode == 0, prune.stderr


def test_update_on_an_up_to_date_policy_leaves_it_byte_identical(initialised_repo: Path) -> None:
    policy = initialised_repo / POLICY
    raw = b"# mine\r\nprompts: {retention_max_days: 5, retention_max_bytes: 7}\r\nepisodes:\r\n    " \
          b"reattach_grace_seconds: 1\r\n    stateless_ttl_seconds: 2\r\nsession: {stale_after_hours: 3}\r\n" \
          b"ledger: {'retention_max_lines': 4}"
    policy.write_bytes(raw)
    done = update(initialised_repo)
    assert done.returncode == 0 and done.stdout.decode().strip() == "layer up to date", done
    assert policy.read_bytes() == raw


@pytest.mark.parametrize("text", ["prompts: [retention_max_days: 5\n", "prompts:\n  a: 1\n a: 2\n",
                                  "- prompts\n"])
def test_update_on_a_policy_that_does_not_read_refuses_byte_identical(initialised_repo: Path, text: str) -> None:
    policy = initialised_repo / POLICY
    policy.write_text(text)
    done = update(initialised_repo)
    assert done.returncode == 10, done
    assert done.stderr.decode().count("\n") == 1 and b"Traceback" not in done.stderr
    assert policy.read_text() == text


@pytest.mark.parametrize("text", ["prompts: 5\n", "prompts: ~\n", "prompts:\n  retention_max_days: 5\n...\n"])
def test_update_where_no_key_has_a_place_refuses_in_one_sentence_byte_identical(
        initialised_repo: Path, text: str) -> None:
    policy = initialised_repo / POLICY
    policy.write_text(text)
    done = update(initialised_repo)
    assert done.returncode in (10, 15), done
    assert done.stderr.decode().count("\n") == 1 and b"Traceback" not in done.stderr
    assert policy.read_text() == text
    assert (initialised_repo / ".ai/local").is_dir()

