"""A task's first message, archived at the task's start from the client's own session file (Cline: its prompt hook
never fires for it, and its TaskStart payload carries no message), through the real executables and a fake Cline
that keeps its files as the cline CLI 3.0.65 does (fake_cline.py). Once per message, with its own episode."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from fake_cline import FakeCline
from support import MAJORDOMUS, open_files

CREDENTIAL = "ghp_FakeTokenNot4RealUse0nlyInTests12345"


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


def prompts(repo: Path) -> list[dict[str, object]]:
    folder = repo / ".ai" / "local" / "prompts"
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]


def start(repo: Path, payload: dict[str, object], env: dict[str, str] | None = None
          ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(MAJORDOMUS), "capture", "session", "--provider", "cline", "--event", "start"],
                          cwd=repo, input=json.dumps(payload), capture_output=True, text=True, timeout=60, env=env)


def task_start(session: str) -> dict[str, object]:
    return {"hookName": "agent_start", "sessionContext": {"rootSessionId": session}, "taskStart": {"taskMetadata": {}}}


def test_a_tasks_first_message_is_archived_at_its_start_redacted_and_joined_to_its_episode(
        initialised_repo: Path, sittings: list[FakeCline], isolated_home: Path) -> None:
    repo = initialised_repo
    c = cline(repo, sittings, "1796686197520_18vel", isolated_home)
    c.run(f"Sum up README.md; the deploy token is {CREDENTIAL}")
    [opened] = open_files(repo).values()
    [record] = prompts(repo)
    assert (record["provider"], record["event"], record["session"], record["id"]) == (
        "cline", "TaskStart", c.session, f"{c.session}#first")
    assert (record["episode"], record["episode_link"]) == (opened["session_id"], "open")
    assert record["text"] == "Sum up README.md; the deploy token is [redacted:github-token]"
    assert [p for p in (repo / ".ai").rglob("*") if p.is_file() and CREDENTIAL.encode() in p.read_bytes()] == []


def test_a_later_run_of_the_session_archives_no_earlier_message_at_its_start(
        initialised_repo: Path, sittings: list[FakeCline], isolated_home: Path) -> None:
    """A second message at the idle prompt starts a run (TaskStart) whose message Cline writes only when the run
    ends; the session file's prompt is then the first run's, already archived: nothing is written again."""
    repo = initialised_repo
    c = cline(repo, sittings, "s-later", isolated_home)
    c.run("first message")
    c.run("second message")
    assert [p["text"] for p in prompts(repo)] == ["first message"]


def test_a_resumed_session_archives_no_message_of_its_earlier_sitting(
        initialised_repo: Path, sittings: list[FakeCline], isolated_home: Path) -> None:
    """`cline --id` is a new process whose start is TaskResume: the file's prompt is the first sitting's, and it
    belongs to the first sitting's episode, never to the resumed one's."""
    repo = initialised_repo
    first = cline(repo, sittings, "s-resumed", isolated_home)
    first.run("first message")
    first.quit()
    again = cline(repo, sittings, "s-resumed", isolated_home)
    again.say("resume")
    again.run("a message of the resumed sitting")
    [record] = prompts(repo)
    assert record["text"] == "first message"
    episodes = {o["session_id"] for o in open_files(repo).values()}
    assert record["episode"] not in episodes  # the first sitting's episode, closed since


def test_a_prompt_hook_sending_the_first_message_again_writes_no_second_record(
        initialised_repo: Path, sittings: list[FakeCline], isolated_home: Path) -> None:
    repo = initialised_repo
    c = cline(repo, sittings, "s-twice", isolated_home)
    c.run("fix the parser")
    c.say("prompt fix the parser")
    c.say("prompt and now the lexer")
    assert sorted((p["text"], p["event"]) for p in prompts(repo)) == [
        ("and now the lexer", "UserPromptSubmit"), ("fix the parser", "TaskStart")]


def test_a_start_repeated_writes_no_second_record(initialised_repo: Path, sittings: list[FakeCline],
                                                   isolated_home: Path) -> None:
    repo = initialised_repo
    c = cline(repo, sittings, "s-repeated", isolated_home)
    c.say("prompt warm up")  # an orphan: no episode yet
    manifest = c.manifest
    data = json.loads(manifest.read_text())
    data["prompt"] = "only once"
    manifest.write_text(json.dumps(data))
    for _ in range(2):
        done = start(repo, task_start(c.session))
        assert done.returncode == 0, done.stderr
    assert [p["text"] for p in prompts(repo) if p["event"] == "TaskStart"] == ["only once"]
    assert "already" in done.stderr, done.stderr


def test_the_session_folder_cline_is_told_to_use_is_read(initialised_repo: Path, tmp_path: Path) -> None:
    """CLINE_SESSION_DATA_DIR moves Cline's sessions; the hook, its child, has the same variable."""
    repo = initialised_repo
    folder = tmp_path / "elsewhere" / "s-moved"
    folder.mkdir(parents=True)
    (folder / "s-moved.json").write_text(json.dumps({"pid": 1, "status": "running", "prompt": "moved prompt",
                                                     "messages_path": str(folder / "s-moved.messages.json")}))
    done = start(repo, task_start("s-moved"), env={**os.environ, "CLINE_SESSION_DATA_DIR": str(tmp_path / "elsewhere")})
    assert done.returncode == 0 and "first message" not in done.stderr, done.stderr
    assert [p["text"] for p in prompts(repo)] == ["moved prompt"]


@pytest.mark.parametrize("content", [b"{not json", b"[]", json.dumps({"prompt": 7}).encode(),
                                     json.dumps({"prompt": "no messages path"}).encode()],
                         ids=["garbage", "a-list", "a-number", "no-messages-path"])
def test_a_session_file_that_says_nothing_usable_opens_the_episode_and_archives_nothing(
        initialised_repo: Path, isolated_home: Path, content: bytes) -> None:
    repo = initialised_repo
    folder = isolated_home / ".cline" / "data" / "sessions" / "s-odd"
    folder.mkdir(parents=True)
    (folder / "s-odd.json").write_bytes(content)
    done = start(repo, task_start("s-odd"))
    assert done.returncode == 0 and done.stderr.startswith("session s-"), done.stderr
    assert [o["provider_session"] for o in open_files(repo).values()] == ["s-odd"]
    assert prompts(repo) == []


def test_a_session_that_names_a_path_is_never_looked_up(initialised_repo: Path, isolated_home: Path) -> None:
    repo = initialised_repo
    (isolated_home / ".cline" / "data").mkdir(parents=True)
    (isolated_home / ".cline" / "data" / "x.json").write_text(json.dumps({"prompt": "outside", "messages_path": "/"}))
    done = start(repo, task_start("../x"))
    assert done.returncode == 0, done.stderr
    assert prompts(repo) == []


def test_a_prompt_the_start_cannot_write_never_fails_the_start(initialised_repo: Path, sittings: list[FakeCline],
                                                               isolated_home: Path) -> None:
    """The archive folder replaced by a symlink: the record is refused, the episode still opens, exit 0."""
    repo = initialised_repo
    prompts_dir = repo / ".ai" / "local" / "prompts"
    for p in prompts_dir.iterdir():
        p.unlink()
    prompts_dir.rmdir()
    prompts_dir.symlink_to(repo)
    folder = isolated_home / ".cline" / "data" / "sessions" / "s-refused"
    folder.mkdir(parents=True)
    (folder / "s-refused.json").write_text(json.dumps({"prompt": "refused", "messages_path": str(folder / "m")}))
    done = start(repo, task_start("s-refused"))
    assert done.returncode == 0, done.stderr
    assert "could not be archived" in done.stderr, done.stderr
    assert [o["provider_session"] for o in open_files(repo).values()] == ["s-refused"]


def answered_already(home: Path, session: str, message_ts_ms: int) -> None:
    """The session file and a messages file holding the run's own message and its answer: a run that ended before
    its start hook read them (the fake API answers within milliseconds)."""
    folder = home / ".cline" / "data" / "sessions" / session
    folder.mkdir(parents=True)
    messages = folder / f"{session}.messages.json"
    (folder / f"{session}.json").write_text(json.dumps({
        "pid": 1, "status": "idle", "prompt": '<user_input mode="act">quick one</user_input>',
        "messages_path": str(messages)}))
    messages.write_text(json.dumps({"messages": [
        {"id": "u", "role": "user", "ts": message_ts_ms,
         "content": [{"type": "text", "text": '<user_input mode="act">quick one</user_input>'}]},
        {"id": "a", "role": "assistant", "ts": message_ts_ms + 40, "content": [{"type": "text", "text": "Done."}]}]}))


def test_a_run_that_ended_before_its_start_hook_read_the_file_still_has_its_first_message_archived(
        initialised_repo: Path, isolated_home: Path) -> None:
    repo = initialised_repo
    answered_already(isolated_home, "s-fast", 1796686278193)
    done = start(repo, {**task_start("s-fast"), "timestamp": "2026-12-07T23:31:18.198Z"})
    assert done.returncode == 0, done.stderr
    assert [p["text"] for p in prompts(repo)] == ["quick one"]


def test_an_earlier_runs_message_in_the_file_is_not_this_starts(initialised_repo: Path, isolated_home: Path) -> None:
    """The same file at a later run's start, minutes after that message: the prompt is the earlier run's."""
    repo = initialised_repo
    answered_already(isolated_home, "s-later-run", 1796686278193)
    done = start(repo, {**task_start("s-later-run"), "timestamp": "2026-12-07T23:36:18.198Z"})
    assert done.returncode == 0, done.stderr
    assert prompts(repo) == []


def test_the_first_message_archived_at_the_start_starts_no_turn(initialised_repo: Path, isolated_home: Path) -> None:
    """Cline runs TaskStart and TaskComplete detached, side by side: a fast answer's TaskComplete can record the
    turn completed before the start hook has archived the message, which must not make it running again."""
    repo = initialised_repo
    answered_already(isolated_home, "s-turn", 1796686278193)
    assert start(repo, {**task_start("s-turn"), "timestamp": "2026-12-07T23:31:18.198Z"}).returncode == 0
    assert [p["episode_link"] for p in prompts(repo)] == ["open"]
    assert [o.get("last_turn") for o in open_files(repo).values()] in ([None], ["none"])
