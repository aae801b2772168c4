"""The hook path imports the standard library only, and only what it needs: its start-up time is a product feature.

Each hook command runs as the real launcher a wired client runs (`majordomus-hook`, the script install names) under
`-X importtime` in a real repository; what it imports beyond a bare `python -c pass` of the same interpreter
is held equal to the list below, per command and per Python. A module added to the hook path fails this test:
make it lazy, or add it here on purpose (docs/decisions.md, "Start-up of the hook path", says what each one costs).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from support import MAJORDOMUS_HOOK

# The builtin SHA-256 (hashlib would load OpenSSL): 3.11 calls it _sha256, 3.12 moved it into _sha2.
SHA = "_sha256" if sys.version_info < (3, 12) else "_sha2"

# Every command: the launcher's module, the fast path's stand-ins (majordomus.lean), the entry, its context and
# errors, JSON through the C accelerator, the typed values, the providers declaration, the payload reader, and the
# layout (fcntl for its locks).
# (the `os` stand-in only where `os` is not loaded yet: under -IS, which test_stand_ins.py runs; here `site` has)
LEAN = {"majordomus.lean", "majordomus.lean.pathlib"}
COMMON = {"majordomus_hook", "__future__", "majordomus", *LEAN, "majordomus.cli", "majordomus.commands",
          "majordomus.commands.context",
          "majordomus.errors", "majordomus.lean.json", "_json", "majordomus.lean.dataclasses",
          "majordomus.clients", "majordomus.clients.payload", "majordomus.clients.providers", "majordomus.layout",
          "fcntl", "majordomus.episodes", "majordomus.episodes.store", "majordomus.identity", SHA,
          "majordomus.simple_yaml", "majordomus.redact",
          "majordomus.episodes.vanished",  # every hook ends the episodes of vanished clients first
          "atexit"}  # built in: the launcher's finish asks it whether anything needs the orderly exit
SESSION = COMMON | {"majordomus.commands.session", "majordomus.episodes.hook", "majordomus.episodes.boundary",
                    "majordomus.ledger"}
EXPECTED: dict[str, set[str]] = {
    # git status at the start (spawned by posix_spawn, read with select), and the mark a racing prompt waits for
    "start": SESSION | {"select", "majordomus.episodes.starting"},
    "end": SESSION | {"select"},  # git status and rev-list at the close
    "compact": SESSION,
    "turn": SESSION,
    # the credential table's rows (a generated module: cached bytecode) are loaded for every prompt's hints
    "prompt": COMMON | {"majordomus.commands.prompt", "majordomus.archive", "majordomus.archive.capture",
                        "majordomus.archive.record", "majordomus.archive.render", "majordomus.redact_rules"},
}
# a prompt of an open episode refreshes it through the store's writer (never the boundary nor the ledger); only one
# without looks for a start's mark
EXPECTED["prompt-open"] = EXPECTED["prompt"]
EXPECTED["prompt"] = EXPECTED["prompt"] | {"majordomus.episodes.starting"}
# `re` (and `enum`, `functools`, `collections` … behind it), only when a prompt's text needs a rule: a hint of
# the credential table is in it (or the table has a `/regex/` hint, which needs `re` to be tried at all)
RE_FAMILY = {"re", "_sre", "re._casefix", "re._compiler", "re._constants", "re._parser", "enum", "functools",
             "_functools", "collections", "_collections", "itertools", "keyword", "operator", "_operator",
             "reprlib", "types", "copyreg", "heapq", "_heapq"}
# never on the hook path, whatever the text
FORBIDDEN = {"pathlib", "datetime", "_datetime", "json", "hashlib", "_hashlib", "typing", "dataclasses", "argparse",
             "subprocess", "contextlib", "importlib", "yaml", "asyncio", "inspect", "fnmatch", "urllib",
             "sqlite3"}  # sqlite3 is the search index's, never the hook's

PLAIN = "please refactor module 3 and keep the tests green"
SECRET = "rotate the api_key = 'Zx81kd02kdkLLqw0ss9' in the vault, then run the tests"


def imported(argv: list[str], cwd: Path, payload: bytes = b"") -> list[str]:
    done = subprocess.run([sys.executable, "-X", "importtime", *argv], input=payload, capture_output=True, cwd=cwd)
    assert done.returncode == 0, done.stderr.decode()
    return [line.split("|")[-1].strip() for line in done.stderr.decode().splitlines()
            if line.startswith("import time:") and not line.endswith("| imported package")]


def hook_imports(repo: Path, payload: dict[str, object], *args: str) -> set[str]:
    """What the real launcher imports for one hook run, beyond a bare interpreter's start-up. It is our own
    script (never a console script pip writes, which before pip 25 imports `re` first), so nothing is excused."""
    bare = set(imported(["-c", "pass"], repo))
    return set(imported([str(MAJORDOMUS_HOOK), *args], repo, json.dumps(payload).encode())) - bare


def table_has_regex_hint() -> bool:
    from majordomus.redact import load_rules

    return any(h.startswith("/") and h.endswith("/") and len(h) > 2 for r in load_rules() for h in r.hints)


@pytest.mark.parametrize("event", ["start", "compact", "turn", "end"])
def test_capture_session_imports_exactly_its_list(initialised_repo: Path, event: str) -> None:
    base = ("capture", "session", "--provider", "claude-code", "--event")
    if event != "start":
        assert hook_imports(initialised_repo, {"session_id": "imp", "source": "startup"}, *base, "start")
    found = hook_imports(initialised_repo, {"session_id": "imp", "source": "startup", "reason": "logout"},
                         *base, event)
    assert found & FORBIDDEN == set()
    assert sorted(found - EXPECTED[event]) == [], "imported beyond the list"
    assert sorted(EXPECTED[event] - found) == [], "the list names what is not imported any more: tighten it"
    if event == "end":
        assert len(list((initialised_repo / ".ai/repo/sessions").glob("2*.md"))) == 1  # the probe really closed


def test_a_start_beside_another_agents_episode_imports_its_recovery_and_nothing_heavy(initialised_repo: Path) -> None:
    """A person running two agents: the second's start looks for the worktree's stale episodes first (recover), in
    epoch seconds and on the hooks' own paths: no datetime, no pathlib (~9 ms of a start before)."""
    base = ("capture", "session", "--provider", "claude-code", "--event")
    hook_imports(initialised_repo, {"session_id": "first-agent", "source": "startup"}, *base, "start")
    found = hook_imports(initialised_repo, {"session_id": "second-agent", "source": "startup"}, *base, "start")
    assert found & FORBIDDEN == set()
    expected = EXPECTED["start"] | {"majordomus.episodes.recover", "majordomus.policy"}
    assert sorted(found - expected) == [], "imported beyond the list"
    assert sorted(expected - found) == [], "the list names what is not imported any more: tighten it"
    assert len(list((initialised_repo / ".ai/local/state/sessions-open").glob("*.yaml"))) == 2


def test_capture_prompt_imports_exactly_its_list_and_re_only_for_a_rule(initialised_repo: Path) -> None:
    base = ("capture", "session", "--provider", "claude-code", "--event")
    hook_imports(initialised_repo, {"session_id": "imp-p", "source": "startup"}, *base, "start")
    regex_hint = table_has_regex_hint()
    kept = list((initialised_repo / ".ai/local/state").glob("patterns.*.marshal"))
    assert kept == []
    for n, (session, text) in enumerate((("imp-p", PLAIN), ("no-such-episode", PLAIN), ("imp-p", SECRET),
                                         ("imp-p", SECRET))):
        payload = {"session_id": session, "prompt_id": f"id-{n}", "prompt": text}
        found = hook_imports(initialised_repo, payload, "capture", "prompt", "--provider", "claude-code")
        assert found & FORBIDDEN == set(), (text, found & FORBIDDEN)
        # the first credential in a worktree compiles its rule with `re`, and writes the compiled code down
        # (majordomus.lean.kept_patterns); every later one builds the pattern from that code: no `re` at all
        needs_re = (text == SECRET and n == 2) or regex_hint
        listed = EXPECTED["prompt-open" if session == "imp-p" else "prompt"]
        if text == SECRET:
            listed = listed | {"majordomus.lean.kept_patterns", "_sre"}
        expected = listed | (RE_FAMILY & found if needs_re else set())
        assert sorted(found - expected) == [], (text, "imported beyond the list")
        assert sorted(listed - found) == [], "the list names what is not imported any more: tighten it"
        assert ("re" in found) == needs_re, (n, text)
        assert ("enum" in found) == needs_re, (n, text)
    [kept_file] = (initialised_repo / ".ai/local/state").glob("patterns.*.marshal")
    assert kept_file.stat().st_mode & 0o777 == 0o600
    records = sorted((initialised_repo / ".ai/local/prompts").glob("*.json"))
    assert len(records) == 4  # the probe really archived each, redacted
    assert all("Zx81kd02kdkLLqw0ss9" not in r.read_text() for r in records)
