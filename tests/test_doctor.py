"""`majordomus doctor` through the real executable: a clean layer has no FAIL; each broken rule is a finding
that names its subject and the command that repairs or shows it; `--json` gives one object per line."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from clients.samples import CONNECTION
from conftest import git
from support import session_payload

LINE = re.compile(r"^(OK|INFO|WARN|FAIL) +(\S+) +(.+?) — (.+?)(  \[reproduce: (.+)\])?$")
LONG_AGO = (datetime.now(timezone.utc) - timedelta(days=3)).strftime("%Y-%m-%dT%H:%M:%SZ")


def doctor(run_majordomus, repo: Path) -> tuple[int, list[dict[str, Any]]]:
    """Run doctor twice, as text and as JSON, and check the two agree line for line."""
    text = run_majordomus("doctor", cwd=repo)
    as_json = run_majordomus("doctor", "--json", cwd=repo)
    assert text.returncode == as_json.returncode, (text.stderr, as_json.stderr)
    lines = text.stdout.decode().splitlines()
    objects = [json.loads(line) for line in as_json.stdout.decode().splitlines()]
    assert len(lines) == len(objects)
    for line, obj in zip(lines, objects):
        match = LINE.match(line)
        assert match, line
        assert (match[1], match[2], match[4], match[6]) == (obj["level"], obj["category"], obj["message"],
                                                            obj["reproduce"])
    return text.returncode, objects


def failing(findings: list[dict[str, Any]], level: str = "FAIL") -> list[dict[str, Any]]:
    return [f for f in findings if f["level"] == level]


def test_a_clean_layer_has_no_fail_and_exits_0(initialised_repo: Path, run_majordomus) -> None:
    code, found = doctor(run_majordomus, initialised_repo)
    assert code == 0
    assert failing(found) == [] and failing(found, "WARN") == []
    assert {"layer", "policy", "providers", "sessions"} <= {f["category"] for f in found}


def test_json_is_one_object_per_line_with_the_five_keys(initialised_repo: Path, run_majordomus) -> None:
    for args in (("doctor", "--json"), ("--json", "doctor")):
        done = run_majordomus(*args, cwd=initialised_repo)
        lines = done.stdout.decode().splitlines()
        assert done.returncode == 0 and len(lines) >= 5, done.stderr  # layer, policy, providers, sessions, prompts…
        for line in lines:
            assert set(json.loads(line)) == {"level", "category", "subject", "message", "reproduce"}


def test_no_layer_fails_naming_init_and_exits_10(git_repo: Path, run_majordomus) -> None:
    code, found = doctor(run_majordomus, git_repo)
    assert code == 10
    (fail,) = failing(found)
    assert fail["subject"] == ".ai" and fail["reproduce"] == "majordomus init"


def test_a_private_directory_readable_by_others_fails_naming_update(initialised_repo: Path, run_majordomus) -> None:
    os.chmod(initialised_repo / ".ai/local/state/sessions-open", 0o755)
    code, found = doctor(run_majordomus, initialised_repo)
    assert code == 10
    (fail,) = [f for f in failing(found) if f["category"] == "layer"]
    assert fail["subject"] == ".ai/local/state/sessions-open/" and "755" in fail["message"]
    assert fail["reproduce"] == "majordomus update"
    assert run_majordomus("update", cwd=initialised_repo).returncode == 0
    assert doctor(run_majordomus, initialised_repo)[0] == 0


def test_a_missing_directory_fails_naming_update(initialised_repo: Path, run_majordomus) -> None:
    (initialised_repo / ".ai/local/state/locks").rmdir()
    code, found = doctor(run_majordomus, initialised_repo)
    assert code == 10
    assert any(f["subject"] == ".ai/local/state/locks/" and f["reproduce"] == "majordomus update"
               for f in failing(found))


def test_a_policy_that_does_not_parse_fails_naming_the_file(initialised_repo: Path, run_majordomus) -> None:
    (initialised_repo / ".ai/repo/policy.yaml").write_text("prompts: [retention_max_days: 90\n")
    code, found = doctor(run_majordomus, initialised_repo)
    assert code == 10
    (fail,) = [f for f in failing(found) if f["category"] == "policy"]
    assert fail["subject"] == ".ai/repo/policy.yaml" and ".ai/repo/policy.yaml does not parse" in fail["message"]


def test_a_policy_value_out_of_range_fails_with_its_key(initialised_repo: Path, run_majordomus) -> None:
    policy = initialised_repo / ".ai/repo/policy.yaml"
    policy.write_text(policy.read_text().replace("retention_max_days: 90", "retention_max_days: -3"))
    code, found = doctor(run_majordomus, initialised_repo)
    assert code == 10
    assert any("prompts.retention_max_days" in f["message"] for f in failing(found))


def test_local_state_not_ignored_by_git_fails_naming_update(initialised_repo: Path, run_majordomus) -> None:
    (initialised_repo / ".gitignore").write_text("")
    code, found = doctor(run_majordomus, initialised_repo)
    assert code == 10
    assert any(f["subject"] == ".ai/local/" and "not ignored" in f["message"] and f["reproduce"] == "majordomus update"
               for f in failing(found))
    assert run_majordomus("update", cwd=initialised_repo).returncode == 0
    assert doctor(run_majordomus, initialised_repo)[0] == 0


def test_tracked_local_state_fails_naming_git_rm_cached(initialised_repo: Path, run_majordomus) -> None:
    git(initialised_repo, "add", "-f", ".ai/local/state")
    (initialised_repo / ".ai/local/state/note.txt").write_text("x")
    git(initialised_repo, "add", "-f", ".ai/local/state/note.txt")
    code, found = doctor(run_majordomus, initialised_repo)
    assert code == 10
    assert any("tracked" in f["message"] and f["reproduce"] == "git rm -r --cached .ai/local" for f in failing(found))


def test_a_failed_capture_session_is_a_fail_naming_the_log(initialised_repo: Path, run_majordomus) -> None:
    done = run_majordomus("capture", "session", "--provider", "claude-code", "--event", "start",
                          cwd=initialised_repo, input=b"[1, 2")
    assert done.returncode == 0
    code, found = doctor(run_majordomus, initialised_repo)
    assert code == 10
    (fail,) = [f for f in failing(found) if f["category"] == "sessions"]
    assert fail["subject"] == ".ai/local/session-contexts/.session-context.log"
    assert "not JSON" in fail["message"]
    assert fail["reproduce"] == "cat .ai/local/session-contexts/.session-context.log"


def _open_file(repo: Path) -> Path:
    (path,) = (repo / ".ai/local/state/sessions-open").glob("*.yaml")
    return path


def _set(path: Path, key: str, value: object) -> None:
    text, count = re.subn(rf"^{key}: .*$", f"{key}: {json.dumps(value)}", path.read_text(), flags=re.MULTILINE)
    assert count == 1
    path.write_text(text)


def test_a_stale_hook_episode_warns_naming_recover_until_recovered(initialised_repo: Path, run_majordomus) -> None:
    run_majordomus("capture", "session", "--provider", "claude-code", "--event", "start", cwd=initialised_repo,
                   input=session_payload("cc-1", source="startup"))
    _set(_open_file(initialised_repo), "last_activity_at", LONG_AGO)
    code, found = doctor(run_majordomus, initialised_repo)
    assert code == 0  # a stale episode is a warning: recover (or the next start) closes it
    (warn,) = failing(found, "WARN")
    assert "idle for more than 24 hour(s)" in warn["message"] and "(claude-code)" in warn["message"]
    assert warn["reproduce"] == "majordomus capture recover"
    assert run_majordomus("capture", "recover", cwd=initialised_repo).returncode == 0
    assert failing(doctor(run_majordomus, initialised_repo)[1], "WARN") == []


def test_a_connection_episode_of_a_killed_server_is_detached_info_then_warns_past_the_grace(initialised_repo: Path,
                                                                                          run_majordomus) -> None:
    """A server killed before it marked its episodes (Copilot SIGKILLs it 3 ms after SIGTERM on every exit) is an
    ordinary end of a sitting: INFO, naming recover; only an episode detached past the grace with nobody to reap
    it is a WARN."""
    run_majordomus("capture", "session", "--provider", CONNECTION, "--event", "start", cwd=initialised_repo,
                   input=session_payload("thread-9", source="attach"))
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    path = _open_file(initialised_repo)
    _set(path, "held_by", child.pid)
    code, found = doctor(run_majordomus, initialised_repo)
    assert code == 0 and failing(found, "WARN") == []
    (info,) = [f for f in found if f["level"] == "INFO" and f["category"] == "sessions"]
    assert "held by a server that is gone" in info["message"] and "thread-9" not in info["message"]
    assert "(generic)" in info["message"] and info["reproduce"] == "majordomus capture recover"
    _set(path, "detached_at", LONG_AGO)
    (warn,) = failing(doctor(run_majordomus, initialised_repo)[1], "WARN")
    assert "detached past the 900 s grace" in warn["message"] and warn["reproduce"] == "majordomus capture recover"


def test_an_open_episode_without_its_working_context_is_reported(initialised_repo: Path, run_majordomus) -> None:
    run_majordomus("capture", "session", "--provider", "gemini", "--event", "start", cwd=initialised_repo,
                   input=session_payload("gem-1"))
    for context in (initialised_repo / ".ai/local/session-contexts").glob("*.md"):
        context.unlink()
    (warn,) = failing(doctor(run_majordomus, initialised_repo)[1], "WARN")
    assert "no working context" in warn["message"]


def test_a_lease_naming_a_dead_pid_is_reported_as_information_not_a_warning(initialised_repo: Path,
                                                                            run_majordomus) -> None:
    """A client that SIGKILLs its server 3 ms after SIGTERM (Copilot CLI does) leaves a lease in an ordinary exit;
    the next start takes it over, so there is nothing for the person to do."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    lease = initialised_repo / ".ai/local/state/mcp/server.json"
    lease.write_text(json.dumps({"schema": "majordomus-mcp-lease/v1", "pid": child.pid, "token": "t",
                                 "root": str(initialised_repo), "url": "http://127.0.0.1:1"}))
    code, found = doctor(run_majordomus, initialised_repo)
    assert code == 0 and failing(found, "WARN") == []
    (info,) = [f for f in failing(found, "INFO") if f["category"] == "server"]
    assert f"pid {child.pid}" in info["message"] and "the next majordomus-mcp takes it over" in info["message"]


