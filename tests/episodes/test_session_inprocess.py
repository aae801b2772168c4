"""The in-process entry the MCP board calls gives the same line as the executable for the same bytes."""

from __future__ import annotations

import json
import re
from pathlib import Path

from clients.samples import CONNECTION
from majordomus.episodes.hook import run_session


def test_the_function_and_the_executable_agree(initialised_repo: Path, run_majordomus) -> None:
    payload = json.dumps({"session_id": "same-bytes", "source": "attach"}).encode()
    first = run_session(initialised_repo, CONNECTION, "start", payload)
    again = run_majordomus("capture", "session", "--provider", CONNECTION, "--event", "start", cwd=initialised_repo,
                           input=payload)
    assert first.exit_code == 0 and re.fullmatch(r"session s-\d{14}-[0-9a-f]{4} opened at \S+Z \(head [0-9a-f]{7}\)",
                                                 first.line)
    sid = first.line.split()[1]
    assert again.stderr.decode().strip().startswith(f"session {sid} already open here since ")
    closing = json.dumps({"session_id": "same-bytes", "reason": "detach"}).encode()
    closed = run_session(initialised_repo, CONNECTION, "end", closing)
    assert closed.line.startswith("episode closed (closed, reason detach) into .ai/repo/sessions/")
    assert run_majordomus("capture", "session", "--provider", CONNECTION, "--event", "end", cwd=initialised_repo,
                          input=closing).stderr.decode().strip() == (
        "no open episode here for provider session same-bytes; nothing to close")


def test_the_boards_note_on_a_repository_without_a_layer_creates_nothing(git_repo: Path) -> None:
    from majordomus.episodes.boundary import set_connection_state

    assert set_connection_state(git_repo, "anything", held_by=1, detached_at=None) is False
    assert not (git_repo / ".ai").exists()
