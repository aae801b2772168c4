"""A vanished client whose own session file says it ended the session itself is recorded `closed`, in its own word.

Cline 3.0.65 runs no end hook when a person leaves its terminal UI (/quit, Ctrl-D, a window closed after an answer)
or a headless run finishes, but writes status `completed`, exit_code 0 and ended_at into its session file; kill -9
leaves `idle` or `running` there. The fake Cline here (fake_cline.py) keeps that file as the real one does, and the
next reader of the episodes decides by it, only when every part of the file agrees, and otherwise as before:
`interrupted`, reason `vanished`.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from fake_cline import FakeCline
from support import MAJORDOMUS, open_files, records


@pytest.fixture
def sittings(initialised_repo: Path) -> Iterator[list[FakeCline]]:
    started: list[FakeCline] = []
    yield started
    for s in started:
        if s.process.poll() is None:
            s.kill()


def cline(repo: Path, sittings: list[FakeCline], session: str, home: Path) -> FakeCline:
    s = FakeCline(repo, session, home / ".cline" / "data" / "sessions")
    sittings.append(s)
    return s


def read_episodes(repo: Path) -> None:
    done = subprocess.run([str(MAJORDOMUS), "episodes"], cwd=repo, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def ended(repo: Path) -> list[tuple[object, object, object]]:
    return [(r["outcome"], r["end_reason"], r["last_turn"]) for r in records(repo).values()]


def test_a_sitting_its_session_file_says_completed_is_closed_with_the_clients_word(
        initialised_repo: Path, sittings: list[FakeCline], isolated_home: Path) -> None:
    repo = initialised_repo
    c = cline(repo, sittings, "s-quit", isolated_home)
    c.run("sum up README.md")
    c.quit()
    read_episodes(repo)
    [record] = records(repo).values()
    assert (record["outcome"], record["end_reason"], record["last_turn"]) == ("closed", "completed", "completed")
    evidence = str(record["end_evidence"])
    assert evidence.startswith(f"the client process {c.process.pid} "), evidence
    assert "; its session file says status completed, exit_code 0, ended_at 20" in evidence, evidence
    assert evidence.endswith(f"pid {c.process.pid}"), evidence
    assert open_files(repo) == {}


@pytest.mark.parametrize("how", ["killed", "left-without-a-word"])
def test_a_sitting_its_session_file_does_not_say_ended_stays_interrupted(
        initialised_repo: Path, sittings: list[FakeCline], isolated_home: Path, how: str) -> None:
    repo = initialised_repo
    c = cline(repo, sittings, f"s-{how}", isolated_home)
    c.run("sum up README.md")
    c.kill() if how == "killed" else c.leave_without_a_word()
    assert json.loads(c.manifest.read_text())["status"] == "idle"
    read_episodes(repo)
    assert ended(repo) == [("interrupted", "vanished", "completed")]


def test_a_resumed_sitting_stays_interrupted_as_the_file_names_the_first_process(
        initialised_repo: Path, sittings: list[FakeCline], isolated_home: Path) -> None:
    """Cline keeps the pid of the process that started the session when `cline --id` resumes it, so the file's
    end cannot be told to be the resumed process's: the first sitting is closed by it, the resumed one is not."""
    repo = initialised_repo
    first = cline(repo, sittings, "s-resumed", isolated_home)
    first.run("sum up README.md")
    first.quit()
    read_episodes(repo)
    again = cline(repo, sittings, "s-resumed", isolated_home)
    again.say("resume")
    again.run("now in fewer words")
    again.quit()
    assert json.loads(again.manifest.read_text())["pid"] == first.process.pid
    read_episodes(repo)
    assert sorted(ended(repo)) == [("closed", "completed", "completed"), ("interrupted", "vanished", "completed")]


def test_an_end_the_file_stamps_before_the_episode_opened_is_an_earlier_sittings(
        initialised_repo: Path, sittings: list[FakeCline], isolated_home: Path) -> None:
    repo = initialised_repo
    c = cline(repo, sittings, "s-earlier", isolated_home)
    c.run("sum up README.md")
    c.quit()
    data = json.loads(c.manifest.read_text())
    data["ended_at"] = "2020-01-01T00:00:00.000Z"
    c.manifest.write_text(json.dumps(data))
    read_episodes(repo)
    assert ended(repo) == [("interrupted", "vanished", "completed")]


def test_a_turn_still_running_stays_interrupted_whatever_the_file_says(
        initialised_repo: Path, sittings: list[FakeCline], isolated_home: Path) -> None:
    repo = initialised_repo
    c = cline(repo, sittings, "s-running", isolated_home)
    c.run("sum up README.md")
    c.say("prompt and then the lexer")  # a prompt starts a turn that no TaskComplete finished
    c.quit()
    read_episodes(repo)
    assert ended(repo) == [("interrupted", "vanished", "running")]


@pytest.mark.parametrize("change", ["garbage", "failed", "exit-code-1", "no-ended-at", "another-pid", "gone"])
def test_a_session_file_that_does_not_say_so_in_every_part_says_nothing(
        initialised_repo: Path, sittings: list[FakeCline], isolated_home: Path, change: str) -> None:
    repo = initialised_repo
    c = cline(repo, sittings, f"s-{change}", isolated_home)
    c.run("sum up README.md")
    c.quit()
    data = json.loads(c.manifest.read_text())
    if change == "garbage":
        c.manifest.write_text("{not json")
    elif change == "gone":
        c.manifest.unlink()
    else:
        edits: dict[str, dict[str, object]] = {"failed": {"status": "failed"}, "exit-code-1": {"exit_code": 1},
                                               "no-ended-at": {"ended_at": None}, "another-pid": {"pid": 1}}
        c.manifest.write_text(json.dumps({**data, **edits[change]}))
    read_episodes(repo)
    assert ended(repo) == [("interrupted", "vanished", "completed")]
