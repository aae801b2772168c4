"""No credential in any record, file name, log or output stream, wherever it came from.

A hostile repository and hostile payloads, through the installed executable: a credential in the branch name,
in an untracked file's name, in the remote URL (user-info, path and query), in the session id, the prompt id
(of a prompt whose text yields no slug, so the file name falls back to the id), the end reason, `cwd`,
`transcript_path`, Copilot-style `initial_prompt`, and in the payload's key names. Then every byte and every
name under `.ai/`, and everything the commands printed, is searched for any piece of the credential.

Every credential here is fake, built to the right shape from obviously made-up parts.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from conftest import RunMajordomus, git

SHAPES = {
    "github-token": "ghp_FakeTokenNot4RealUse0nlyInTests12345",
    "gitlab-token": "glpat-Fake0GitLab1Token2xy",
    "aws-access-key-id": "AKIAFAKEK3YN0TREAL22",
}


def pieces(secret: str) -> list[str]:
    """What must not survive: the whole credential and its distinctive tail (a cut one leaks as much)."""
    return [secret, secret[-12:]]


def everything_under(root: Path) -> list[tuple[str, bytes]]:
    found = []
    for path in sorted(root.rglob("*")):
        body = path.read_bytes() if path.is_file() and not path.is_symlink() else b""
        found.append((str(path.relative_to(root)), body))
    return found


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_credential_planted_in_every_outside_field_reaches_no_byte_name_or_stream(
        shape: str, initialised_repo: Path, run_majordomus: RunMajordomus) -> None:
    secret = SHAPES[shape]
    repo = initialised_repo
    git(repo, "remote", "add", "origin", f"https://deploy:{secret}@git.example.com/acme/{secret}.git?t={secret}")
    git(repo, "checkout", "-q", "-b", f"feature/{secret}")
    (repo / f"notes-{secret}.txt").write_text("an untracked file whose name holds the credential\n")
    session = f"sess-{secret}"
    hostile = {"cwd": f"/home/dev/{secret}/repo", "transcript_path": f"/home/dev/.claude/{secret}.jsonl",
               "initial_prompt": f"use {secret}", "initialPrompt": f"use {secret}"}
    outputs: list[subprocess.CompletedProcess] = []

    def run(*args: str, payload: dict[str, object]) -> subprocess.CompletedProcess:
        done = run_majordomus(*args, cwd=repo, input=json.dumps(payload).encode())
        outputs.append(done)
        return done

    started = run("capture", "session", "--provider", "claude-code", "--event", "start",
                  payload={"session_id": session, "source": "startup", "hook_event_name": "SessionStart", **hostile})
    assert started.returncode == 0, started.stderr
    prompted = run("capture", "prompt", "--provider", "claude-code",
                   payload={"session_id": session, "prompt_id": f"p-{secret}", "prompt": "!!! ???",
                            "hook_event_name": "UserPromptSubmit", **hostile})
    assert prompted.returncode == 0, prompted.stderr
    orphan = run("capture", "prompt", "--provider", "claude-code",
                 payload={"session_id": f"other-{secret}", "prompt_id": f"q-{secret}", "prompt": "... ",
                          **hostile})
    assert orphan.returncode == 0, orphan.stderr
    ended = run("capture", "session", "--provider", "claude-code", "--event", "end",
                payload={"session_id": session, "reason": f"killed by {secret} " + "x" * 300, **hostile})
    assert ended.returncode == 0, ended.stderr
    # a payload that names no session: its key names go to the log
    nameless = run("capture", "session", "--provider", "claude-code", "--event", "start",
                   payload={f"key-{secret}": 1})
    assert nameless.returncode == 0, nameless.stderr

    closed = [p for p in sorted((repo / ".ai/repo/sessions").glob("*.md")) if p.name != "README.md"]
    assert len(closed) == 1, "the session was recorded"
    assert len(list((repo / ".ai/local/prompts").glob("*.json"))) == 2, "both prompts were archived"
    assert f"[redacted:{shape}]" in closed[0].read_text(encoding="utf-8"), "the branch is there, redacted"
    leaks = []
    for name, body in everything_under(repo / ".ai"):
        for piece in pieces(secret):
            if piece in name or piece.encode() in body:
                leaks.append(name)
    for done in outputs:
        for piece in pieces(secret):
            if piece.encode() in done.stdout + done.stderr:
                leaks.append(f"output of {done.args[1:4]}")
    assert leaks == []
    record = closed[0].read_text(encoding="utf-8")
    reason_line = next(line for line in record.splitlines() if line.startswith("end_reason:"))
    assert len(reason_line) < 100, "a free-text reason is cut short"
