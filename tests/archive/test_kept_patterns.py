"""The credential table's patterns, kept compiled in a worktree (majordomus.lean.kept_patterns), match as `re`'s.

A prompt holding a credential builds its rule's pattern from the code an earlier capture wrote under
`.ai/local/state/` instead of importing `re` (~5 ms on 3.11). A pattern built that way must find every span `re`'s
finds, and a kept file that is damaged, foreign or a link must cost time only: never a credential, never a failure.
"""

from __future__ import annotations

import json
import marshal
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import majordomus.redact as redact_module
from majordomus.layout import Layout
from majordomus.lean import kept_patterns
from majordomus.redact import load_rules, table_sources
from support import MAJORDOMUS_HOOK

TABLE = json.loads((Path(redact_module.__file__).parent / "archive" / "redact_rules.json").read_text())
TOKEN = "ghp_" + "FakeTokenNot4RealUse0nlyInTests12345"  # a GitHub token's shape, made up


def matches(pattern: object, text: str) -> list[tuple[tuple[int, int], dict[str, str | None]]]:
    return [(m.span(), m.groupdict()) for m in pattern.finditer(text)]  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def kept(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """Every source of the table, built from a kept file written and read back through the real module."""
    import re

    root = tmp_path_factory.mktemp("kept")
    (root / ".ai/local/state").mkdir(parents=True)
    layout = Layout(root)
    written = kept_patterns.save(layout, table_sources())
    assert written == len(set(table_sources()))
    built = {source: kept_patterns.compiled(layout, source) for source in table_sources()}
    assert all(pattern is not None for pattern in built.values())
    assert all(p.pattern == s and p.flags == re.compile(s).flags for s, p in built.items())  # type: ignore[union-attr]
    return built  # type: ignore[return-value]


def test_every_rule_matches_its_examples_and_near_misses_as_re_does(kept: dict[str, object]) -> None:
    import re

    texts = [e["text"] for rule in TABLE["rules"] for e in rule["examples"]]
    texts += [m if isinstance(m, str) else m["text"] for rule in TABLE["rules"] for m in rule["near_misses"]]
    assert len(texts) > 100
    for source, pattern in kept.items():
        for text in texts:
            for variant in (text, text.lower(), f"x {text} y"):
                assert matches(pattern, variant) == matches(re.compile(source), variant), (source, variant)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(["ghp_", "sk-", "AKIA", "xoxb-", "eyJ", "://", "u:p@h", "key", "=", " ", "\n",
                                 "Bearer ", "Basic ", "-----BEGIN", "_", "A", "z", "0", "9", "K", "\u212a", "é",
                                 "token: ", '"', "'"]), max_size=60), st.integers(min_value=0, max_value=3))
def test_kept_patterns_match_generated_text_as_re_does(kept: dict[str, object], parts: list[str],
                                                       repeat: int) -> None:
    import re

    text = "".join(parts) * (repeat + 1) + TOKEN[: len(parts)]
    for source, pattern in kept.items():
        assert matches(pattern, text) == matches(re.compile(source), text), source


def test_redaction_with_kept_patterns_equals_redaction_with_re(tmp_path: Path) -> None:
    """The whole redactor, once from `re` and once from the kept file, over every example of the table."""
    (tmp_path / ".ai/local/state").mkdir(parents=True)
    layout = Layout(tmp_path)
    kept_patterns.save(layout, table_sources())
    texts = [f"please use {e['text']} now" for rule in TABLE["rules"] for e in rule["examples"]]
    saved = dict(redact_module._compiled)
    try:
        redact_module._compiled.clear()
        by_re = [redact_module.redact(t) for t in texts]
        redact_module._compiled.clear()
        redact_module.keep_compiled_in(layout)
        by_kept = [redact_module.redact(t) for t in texts]
        assert not redact_module.take_missed()  # every pattern came from the file
    finally:
        redact_module._keeper = None
        redact_module._compiled.clear()
        redact_module._compiled.update(saved)
    assert by_kept == by_re
    assert all(fired for _, fired in by_kept)
    assert {r.name for r in load_rules()} <= {name for _, fired in by_kept for name in fired}


def _capture(repo: Path, text: str, n: int) -> subprocess.CompletedProcess[bytes]:
    payload = json.dumps({"session_id": "kept", "prompt_id": f"k-{n}", "prompt": text}).encode()
    return subprocess.run([sys.executable, "-X", "importtime", str(MAJORDOMUS_HOOK), "capture", "prompt",
                           "--provider", "claude-code"], input=payload, capture_output=True, cwd=repo)


def _imported(done: subprocess.CompletedProcess[bytes]) -> set[str]:
    return {line.split("|")[-1].strip() for line in done.stderr.decode().splitlines() if line.startswith("import time")}


def _records(repo: Path) -> list[str]:
    return [p.read_text() for p in sorted((repo / ".ai/local/prompts").glob("*.json"))]


DAMAGED = {
    "garbage": b"\x00\xff not marshal at all",
    "truncated": None,  # the real file cut in half
    "wrong-types": marshal.dumps({"ghp": 5, 7: b"x"}),
    "wrong-code": None,  # each entry's numbers replaced by nonsense the engine must refuse
    "empty": b"",
}


@pytest.mark.parametrize("damage", sorted(DAMAGED))
def test_a_damaged_kept_file_costs_time_only_and_is_written_afresh(initialised_repo: Path, damage: str) -> None:
    first = _capture(initialised_repo, f"push with {TOKEN} please", 0)
    assert first.returncode == 0, first.stderr.decode()
    [path] = (initialised_repo / ".ai/local/state").glob("patterns.*.marshal")
    good = path.read_bytes()
    if damage == "truncated":
        bad = good[: len(good) // 2]
    elif damage == "wrong-code":
        entries = marshal.loads(good)
        bad = marshal.dumps({k: marshal.dumps((32, [99999, 1, 2], 0, {}, (None,))) for k in entries})
    else:
        bad = DAMAGED[damage]  # type: ignore[assignment]
    path.write_bytes(bad)
    again = _capture(initialised_repo, f"and again {TOKEN} later", 1)
    assert again.returncode == 0
    assert "re" in _imported(again)  # compiled by `re` after all
    assert path.read_bytes() == good  # and the file is whole again
    assert path.stat().st_mode & 0o777 == 0o600
    third = _capture(initialised_repo, f"once more {TOKEN} now", 2)
    assert "re" not in _imported(third)
    records = _records(initialised_repo)
    assert len(records) == 3 and all(TOKEN not in r and "[redacted:github-token]" in r for r in records)
    assert not (initialised_repo / ".ai/local/hook-failures.log").exists()


def test_a_kept_file_that_is_a_link_is_neither_read_nor_written_through(initialised_repo: Path,
                                                                        tmp_path: Path) -> None:
    probe = _capture(initialised_repo, f"push with {TOKEN} please", 0)
    [path] = (initialised_repo / ".ai/local/state").glob("patterns.*.marshal")
    outside = tmp_path / "outside.bin"
    outside.write_bytes(path.read_bytes())
    path.unlink()
    path.symlink_to(outside)
    before = outside.read_bytes()
    done = _capture(initialised_repo, f"again {TOKEN} there", 1)
    assert probe.returncode == done.returncode == 0
    assert "re" in _imported(done)  # the link was not followed to the code it points at
    assert path.is_symlink() and outside.read_bytes() == before  # nor written through
    assert all(TOKEN not in r for r in _records(initialised_repo))
    assert not (initialised_repo / ".ai/local/hook-failures.log").exists()


def test_a_file_kept_by_another_interpreter_is_not_read(initialised_repo: Path) -> None:
    """The name holds the interpreter's cache tag and the engine's magic number: a worktree shared by two
    Pythons keeps one file per interpreter, and each reads only its own."""
    import _sre  # type: ignore[import-not-found]

    state = initialised_repo / ".ai/local/state"
    never = marshal.dumps(kept_patterns.compile_arguments("(?!)"))  # code that matches nothing
    foreign = state / f"patterns.cpython-399-{_sre.MAGIC + 1}.marshal"
    foreign.write_bytes(marshal.dumps(dict.fromkeys(table_sources(), never)))
    os.chmod(foreign, 0o600)
    before = foreign.read_bytes()
    done = _capture(initialised_repo, f"push with {TOKEN} please", 0)
    assert done.returncode == 0
    assert all(TOKEN not in r and "[redacted:github-token]" in r for r in _records(initialised_repo))
    own = state / f"patterns.{sys.implementation.cache_tag}-{_sre.MAGIC}.marshal"
    assert own.is_file() and foreign.read_bytes() == before
