"""A client's compaction event counts one compaction on the open episode, with its time in the ledger, and the
episode stays open; Codex's is PostCompact (fired, like PreCompact, by its automatic compaction: see
tests/real_clients/test_auto_compaction.py). Through the installed executable, walking every hook provider whose
row declares a compaction event."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from clients.samples import DECLARED, HOOK_SESSION_PROVIDERS, session_bytes
from conftest import RunMajordomus
from support import open_files, records

COMPACTING = [n for n in HOOK_SESSION_PROVIDERS if "compact" in DECLARED[n].session.events]  # type: ignore[union-attr]
# Codex 0.171.0's PostCompact after an automatic compaction, as the pinned client sent it (paths trimmed)
CODEX_POST_COMPACT = {"session_id": "{session}", "turn_id": "t-2", "transcript_path": "/h/rollout.jsonl", "cwd": "/w",
                      "hook_event_name": "PostCompact", "model": "gpt-5", "trigger": "auto"}


def session(run: RunMajordomus, repo: Path, name: str, event: str, payload: bytes) -> str:
    done = run("capture", "session", "--provider", name, "--event", event, cwd=repo, input=payload)
    assert done.returncode == 0 and done.stdout == b"", done.stderr
    return done.stderr.decode()


def compact_payload(name: str, ps: str) -> bytes:
    row = DECLARED[name].session_row()
    assert row is not None
    (event, *_) = row.events["compact"]
    payload: dict[str, Any] = {row.session_keys[0]: ps, "hook_event_name": event, "trigger": "auto"}
    return json.dumps(payload).encode()


def ledger(repo: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (repo / ".ai/local/state/ledger.jsonl").read_text().splitlines()]


def test_codex_declares_its_post_compact_event() -> None:
    row = DECLARED["codex"].session_row()
    assert row is not None
    assert DECLARED["codex"].offers["compaction"] == "hook"
    assert list(row.events["compact"]) == ["PostCompact"]


@pytest.mark.parametrize("name", COMPACTING)
def test_a_compaction_is_counted_with_its_time_and_the_episode_stays_open(
        initialised_repo: Path, run_majordomus: RunMajordomus, name: str) -> None:
    repo, ps = initialised_repo, f"{name}-compacting"
    assert "opened at" in session(run_majordomus, repo, name, "start", session_bytes(name, "start", ps))
    payload = (json.dumps({k: (ps if v == "{session}" else v) for k, v in CODEX_POST_COMPACT.items()}).encode()
               if name == "codex" else compact_payload(name, ps))
    session(run_majordomus, repo, name, "compact", payload)
    (opened,) = open_files(repo).values()
    assert opened["compactions"] == 1
    [compacted] = [line for line in ledger(repo) if line["event"] == "session.compacted"]
    assert compacted["session"] == opened["session_id"] and compacted["compactions"] == 1
    line = session(run_majordomus, repo, name, "end", session_bytes(name, "end", ps, "other"))
    assert "episode closed (" in line, line
    (record,) = records(repo).values()
    assert record["compactions"] == 1
    assert record["started_at"] <= compacted["ts"] <= record["closed_at"]


def test_install_wires_codexs_post_compact(initialised_repo: Path, run_majordomus: RunMajordomus) -> None:
    done = run_majordomus("capture", "install", "--provider", "codex", cwd=initialised_repo)
    assert done.returncode == 0, done.stderr
    hooks = json.loads((initialised_repo / ".codex/hooks.json").read_text())["hooks"]
    assert "capture session --provider codex --event compact" in json.dumps(hooks["PostCompact"])
    assert "PreCompact" not in hooks  # one event per compaction: PreCompact as well would count it twice
