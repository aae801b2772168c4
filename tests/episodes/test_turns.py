"""A finished turn tells a completed headless run from a killed one; Gemini's PreCompress is
no compaction. Through the installed executable, walking every provider whose row declares a turn event."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from clients.samples import DECLARED, HOOK_SESSION_PROVIDERS, SAMPLES, session_bytes, session_payload
from conftest import RunMajordomus
from support import open_files, records

TURN_PROVIDERS = [n for n in HOOK_SESSION_PROVIDERS if "turn" in DECLARED[n].session.events]  # type: ignore[union-attr]


def interrupting_reason(name: str) -> str:
    """An end reason of this client that is not deliberate (the one a SIGTERM or a `-p` run sends)."""
    row = DECLARED[name].session_row()
    assert row is not None
    ends = SAMPLES[name]["ends"].items()
    return next(r for r, outcome in ends if outcome == "interrupted" and r not in row.deliberate)


def has_key(payload: dict[str, Any], key: str) -> bool:
    """A row's key, dotted for a nested field (Cline's sessionContext.rootSessionId), is in the payload."""
    node: Any = payload
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def put_key(payload: dict[str, Any], key: str, value: str) -> None:
    *outer, last = key.split(".")
    node = payload
    for part in outer:
        node = node.setdefault(part, {})
    node[last] = value


def prompt_bytes(name: str, session: str, text: str) -> bytes:
    payload: dict[str, Any] = copy.deepcopy(SAMPLES[name]["prompt"])
    prompt_row = DECLARED[name].prompt
    assert prompt_row is not None
    for key in prompt_row.session_keys:
        if has_key(payload, key):
            put_key(payload, key, session)
    if not any(has_key(payload, key) for key in prompt_row.session_keys):
        put_key(payload, prompt_row.session_keys[0], session)
    for key in prompt_row.text_keys:
        if has_key(payload, key):
            put_key(payload, key, text)
    for key in prompt_row.id_keys:
        if has_key(payload, key):
            put_key(payload, key, f"id-{text}")  # a prompt id once seen is the same prompt: each text its own id
    return json.dumps(payload).encode()


def session(run: RunMajordomus, repo: Path, name: str, event: str, payload: bytes) -> str:
    done = run("capture", "session", "--provider", name, "--event", event, cwd=repo, input=payload)
    assert done.returncode == 0 and done.stdout == b"", done.stderr
    return done.stderr.decode()


def sitting(run: RunMajordomus, repo: Path, name: str, ps: str, *, turn: dict[str, Any] | None = None,
            prompt: bool = True) -> dict[str, Any]:
    """start, a prompt, optionally the client's end-of-turn, then an end that is not deliberate: the record."""
    assert "opened at" in session(run, repo, name, "start", session_bytes(name, "start", ps))
    if prompt:
        done = run("capture", "prompt", "--provider", name, cwd=repo, input=prompt_bytes(name, ps, "please refactor"))
        assert done.returncode == 0, done.stderr
    if turn is not None:
        line = session(run, repo, name, "turn", json.dumps(turn).encode())
        assert line.startswith("session s-") and " turn " in line, line
    line = session(run, repo, name, "end", session_bytes(name, "end", ps, interrupting_reason(name)))
    assert "episode closed (" in line, line
    rel = line.strip().rsplit(" into ", 1)[1]
    assert open_files(repo) == {}
    return records(repo)[rel]


@pytest.mark.parametrize("name", TURN_PROVIDERS)
def test_a_finished_turn_then_an_undeliberate_end_is_closed_with_the_clients_reason(
        initialised_repo: Path, run_majordomus: RunMajordomus, name: str) -> None:
    record = sitting(run_majordomus, initialised_repo, name, f"{name}-done",
                     turn=session_payload(name, "turn", f"{name}-done"))
    assert record["outcome"] == "closed"
    assert record["end_reason"] == interrupting_reason(name)  # kept verbatim
    assert record["last_turn"] == "completed"


@pytest.mark.parametrize("name", TURN_PROVIDERS)
def test_a_turn_cut_short_by_the_end_is_interrupted(initialised_repo: Path, run_majordomus: RunMajordomus,
                                                    name: str) -> None:
    record = sitting(run_majordomus, initialised_repo, name, f"{name}-killed")
    assert record["outcome"] == "interrupted" and record["last_turn"] == "running"


@pytest.mark.parametrize("name", TURN_PROVIDERS)
def test_a_prompt_after_the_last_finished_turn_makes_it_running_again(initialised_repo: Path,
                                                                      run_majordomus: RunMajordomus,
                                                                      name: str) -> None:
    repo, ps = initialised_repo, f"{name}-again"
    assert "opened at" in session(run_majordomus, repo, name, "start", session_bytes(name, "start", ps))
    run_majordomus("capture", "prompt", "--provider", name, cwd=repo, input=prompt_bytes(name, ps, "one"))
    session(run_majordomus, repo, name, "turn", json.dumps(session_payload(name, "turn", ps)).encode())
    (opened,) = open_files(repo).values()
    assert opened["last_turn"] == "completed"
    run_majordomus("capture", "prompt", "--provider", name, cwd=repo, input=prompt_bytes(name, ps, "two"))
    (opened,) = open_files(repo).values()
    assert opened["last_turn"] == "running"
    line = session(run_majordomus, repo, name, "end", session_bytes(name, "end", ps, interrupting_reason(name)))
    assert "(interrupted, reason" in line, line


def test_an_episode_without_a_prompt_is_none_and_stays_interrupted(initialised_repo: Path,
                                                                  run_majordomus: RunMajordomus) -> None:
    record = sitting(run_majordomus, initialised_repo, "claude-code", "cc-idle", prompt=False)
    assert record["outcome"] == "interrupted" and record["last_turn"] == "none"


def test_a_cursor_stop_that_says_aborted_does_not_complete_the_turn(initialised_repo: Path,
                                                                    run_majordomus: RunMajordomus) -> None:
    aborted = {**session_payload("cursor", "turn", "cur-1"), "status": "aborted"}
    assert "completed" in SAMPLES["cursor"]["turn"]["status"]
    record = sitting(run_majordomus, initialised_repo, "cursor", "cur-1", turn=aborted)
    assert record["outcome"] == "interrupted" and record["last_turn"] == "running"


def test_a_turn_with_no_open_episode_says_so_and_writes_nothing(initialised_repo: Path,
                                                                run_majordomus: RunMajordomus) -> None:
    line = session(run_majordomus, initialised_repo, "codex", "turn", session_bytes("codex", "turn", "nobody"))
    assert line == "no open episode here for provider session nobody; turn not recorded\n"
    assert open_files(initialised_repo) == {} and records(initialised_repo) == {}


def test_recover_closes_a_stale_episode_interrupted_even_after_a_finished_turn(initialised_repo: Path,
                                                                               run_majordomus: RunMajordomus) -> None:
    repo, ps = initialised_repo, "cc-stale"
    session(run_majordomus, repo, "claude-code", "start", session_bytes("claude-code", "start", ps))
    session(run_majordomus, repo, "claude-code", "turn", session_bytes("claude-code", "turn", ps))
    (path,) = (repo / ".ai/local/state/sessions-open").glob("*.yaml")
    text = path.read_text()
    stamp = next(line for line in text.splitlines() if line.startswith("last_activity_at:"))
    path.write_text(text.replace(stamp, 'last_activity_at: "2020-01-01T00:00:00Z"'))
    done = run_majordomus("capture", "recover", cwd=repo)
    assert done.returncode == 0, done.stderr
    (record,) = records(repo).values()
    assert record["outcome"] == "interrupted" and record["end_reason"] == "stale"
    assert record["last_turn"] == "completed"


def test_gemini_precompress_counts_no_compaction(initialised_repo: Path, run_majordomus: RunMajordomus) -> None:
    """PreCompress fires before every model request (REAL-CLIENTS.md): a one-prompt run compacted nothing."""
    repo, ps = initialised_repo, "gem-1"
    assert DECLARED["gemini"].offers["compaction"] == "none"
    session(run_majordomus, repo, "gemini", "start", session_bytes("gemini", "start", ps))
    pre = json.dumps({"session_id": ps, "hook_event_name": "PreCompress", "trigger": "auto"}).encode()
    line = session(run_majordomus, repo, "gemini", "compact", pre)
    assert line == "capture session: gemini declares no compaction event (offers compaction: none); not counted\n"
    session(run_majordomus, repo, "gemini", "turn", session_bytes("gemini", "turn", ps))
    line = session(run_majordomus, repo, "gemini", "end", session_bytes("gemini", "end", ps, "exit"))
    (record,) = records(repo).values()
    assert record["compactions"] == 0 and record["outcome"] == "closed"


@pytest.mark.parametrize("name", TURN_PROVIDERS)
def test_install_wires_the_end_of_turn_hook(initialised_repo: Path, run_majordomus: RunMajordomus,
                                            name: str) -> None:
    done = run_majordomus("capture", "install", "--provider", name, cwd=initialised_repo)
    assert done.returncode == 0, done.stderr
    row = DECLARED[name].session_row()
    assert row is not None
    install = DECLARED[name].install
    config = (install.local_config if install is not None else None) or DECLARED[name].config
    assert config is not None
    for event in row.events["turn"]:
        if install is not None and install.hook_style == "executables":  # Cline: a script named after the event
            handlers = (initialised_repo / config / event).read_text()
        else:
            handlers = json.dumps(json.loads((initialised_repo / config).read_text())["hooks"][event])
        assert f"capture session --provider {name} --event turn" in handlers, handlers
    if name == "gemini":
        assert "PreCompress" not in json.loads((initialised_repo / config).read_text())["hooks"]


def deliberate_reason(name: str) -> str | None:
    row = DECLARED[name].session_row()
    assert row is not None
    return next((r for r, outcome in SAMPLES[name]["ends"].items() if outcome == "closed" and r in row.deliberate),
                None)


DELIBERATE_TURN_PROVIDERS = [n for n in TURN_PROVIDERS if deliberate_reason(n) is not None
                             and DECLARED[n].install is not None and not DECLARED[n].install.unsupported]


def deliberate_end(run: RunMajordomus, repo: Path, name: str, ps: str, *, finish_turn: bool) -> dict[str, Any]:
    assert "opened at" in session(run, repo, name, "start", session_bytes(name, "start", ps))
    done = run("capture", "prompt", "--provider", name, cwd=repo, input=prompt_bytes(name, ps, "please refactor"))
    assert done.returncode == 0, done.stderr
    if finish_turn:
        session(run, repo, name, "turn", json.dumps(session_payload(name, "turn", ps)).encode())
    reason = deliberate_reason(name)
    assert reason is not None
    line = session(run, repo, name, "end", session_bytes(name, "end", ps, reason))
    rel = line.strip().rsplit(" into ", 1)[1]
    return records(repo)[rel]


@pytest.mark.parametrize("name", DELIBERATE_TURN_PROVIDERS)
def test_a_deliberate_reason_while_the_wired_turn_is_still_running_is_interrupted(
        initialised_repo: Path, run_majordomus: RunMajordomus, name: str) -> None:
    """Gemini sends `exit`, Copilot `complete`, for a SIGTERM mid-answer as for a finished -p run (REAL-CLIENTS.md):
    with the client's end-of-turn hook wired, a turn that never finished says the sitting was cut short."""
    assert run_majordomus("capture", "install", "--provider", name, cwd=initialised_repo).returncode == 0
    killed = deliberate_end(run_majordomus, initialised_repo, name, f"{name}-sigterm", finish_turn=False)
    assert (killed["outcome"], killed["last_turn"]) == ("interrupted", "running")
    assert killed["end_reason"] == deliberate_reason(name)  # the client's word, kept verbatim
    finished = deliberate_end(run_majordomus, initialised_repo, name, f"{name}-finished", finish_turn=True)
    assert (finished["outcome"], finished["last_turn"]) == ("closed", "completed")


@pytest.mark.parametrize("name", DELIBERATE_TURN_PROVIDERS)
def test_without_the_turn_hook_wired_a_deliberate_reason_stays_closed(initialised_repo: Path,
                                                                     run_majordomus: RunMajordomus,
                                                                     name: str) -> None:
    """An install that predates the turn event (or hand wiring without it) gives no evidence of a running turn."""
    record = deliberate_end(run_majordomus, initialised_repo, name, f"{name}-old-install", finish_turn=False)
    assert (record["outcome"], record["last_turn"]) == ("closed", "running")
