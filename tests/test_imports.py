"""The hook path imports the standard library only: its start-up time is a product feature."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("yaml", "starlette", "uvicorn", "anyio", "pydantic", "httpx", "mcp", "h11", "click", "asyncio",
         "subprocess", "dataclasses", "typing", "hashlib", "contextlib", "importlib",
         "sqlite3")  # these cost a hook ~17 ms; sqlite3 is the search index's, never the hook's

# What a Python's own pathlib loads, which the hook path cannot avoid: 3.13's pathlib imports glob, and glob
# imports contextlib. Listed per version, and checked below to be still true, so the budget is never looser.
LOADED_BY_PATHLIB = {(3, 13): ("contextlib",)}.get(sys.version_info[:2], ())

PROBE = """
import sys, io
sys.stdin = io.TextIOWrapper(io.BytesIO(sys.argv[1].encode()))
from majordomus.cli import main
code = main(sys.argv[2:])
import json
print(json.dumps(sorted(m for m in sys.modules)))
"""


def modules_after(repo: Path, payload: str, *args: str) -> set[str]:
    done = subprocess.run([sys.executable, "-c", PROBE, payload, "--repo", str(repo), *args], capture_output=True,
                          text=True, check=True)
    return set(json.loads(done.stdout.splitlines()[-1]))


def test_capture_session_start_and_end_import_nothing_heavy(initialised_repo: Path) -> None:
    for event, payload in (("start", {"session_id": "imp", "source": "startup"}),
                           ("compact", {"session_id": "imp"}),
                           ("end", {"session_id": "imp", "reason": "logout"})):
        loaded = modules_after(initialised_repo, json.dumps(payload), "capture", "session", "--provider",
                               "claude-code", "--event", event)
        heavy = sorted(m for m in loaded if m.split(".")[0] in HEAVY and m not in LOADED_BY_PATHLIB)
        assert heavy == [], (event, heavy)
        assert not any(m.startswith("majordomus.mcp") or m.startswith("majordomus.capabilities") for m in loaded)


def test_capture_prompt_imports_nothing_heavy_open_or_orphan(initialised_repo: Path) -> None:
    modules_after(initialised_repo, json.dumps({"session_id": "imp-p", "source": "startup"}), "capture", "session",
                  "--provider", "claude-code", "--event", "start")
    for session in ("imp-p", "no-such-episode"):
        payload = {"session_id": session, "prompt_id": f"id-{session}",
                   "prompt": "rotate the api_key = 'Zx81kd02kdkLLqw0ss9' in the vault, then run the tests"}
        loaded = modules_after(initialised_repo, json.dumps(payload), "capture", "prompt", "--provider", "claude-code")
        heavy = sorted(m for m in loaded if m.split(".")[0] in HEAVY and m not in LOADED_BY_PATHLIB)
        assert heavy == [], (session, heavy)
    records = sorted((initialised_repo / ".ai/local/prompts").glob("*.json"))
    assert len(records) == 2  # the probe really archived both, redacted
    assert all("Zx81kd02kdkLLqw0ss9" not in r.read_text() for r in records)


def test_what_pathlib_is_allowed_to_load_it_really_loads() -> None:
    if not LOADED_BY_PATHLIB:
        pytest.skip(f"Python {sys.version_info[0]}.{sys.version_info[1]} has no allowance to check")
    probe = "import sys; import pathlib; print(' '.join(sorted(sys.modules)))"
    loaded = subprocess.run([sys.executable, "-I", "-c", probe], capture_output=True, text=True, check=True).stdout
    assert set(LOADED_BY_PATHLIB) <= set(loaded.split())
