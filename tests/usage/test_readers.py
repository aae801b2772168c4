"""Each client's reader on that client's real record (tests/usage/samples/: written by the pinned clients, offline,
the fake model API giving request n input 1000+n, output 20+n, cache read 300+n, cache write 40+n where the
API has them, reasoning 5+n; trimmed): the four kinds add up to what the answers reported, each answer once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from majordomus.usage import claude_code, codex, copilot, gemini, tally
from majordomus.usage.tally import Tally, Tokens, Window

SAMPLES = Path(__file__).with_name("samples")
ALWAYS = Window(0, 2**40)

# Request n: OpenAI and Gemini count the cache inside the input (1000+n), so the input without it is 700;
# Gemini's output is the candidates (20+n) and the thoughts (5+n). Gemini's requests 1 and 4 were its router's.
EXPECTED = {
    "claude-code": (claude_code, "claude-opus-5-5", Tokens(3006, 66, 906, 126)),
    "codex": (codex, "gpt-5", Tokens(2100, 66, 906, 0)),
    "gemini": (gemini, "gemini-3.8-flash", Tokens(2100, 95, 910, 0)),
    "copilot": (copilot, "fake-model", Tokens(2100, 66, 906, 0)),
}


def counted(reader: object, path: Path, window: Window = ALWAYS) -> Tally:
    found = Tally()
    reader.read([path], window, found)  # type: ignore[attr-defined]
    return found


@pytest.mark.parametrize("client", sorted(EXPECTED))
def test_each_clients_own_record_adds_up_to_what_its_three_answers_reported(client: str) -> None:
    reader, model, tokens = EXPECTED[client]
    found = counted(reader, SAMPLES / f"{client}.jsonl")
    assert found.models == {model: tokens} and found.requests == {model: 3} and found.skipped == 0


def test_an_answer_written_as_one_line_per_content_block_counts_once() -> None:
    lines = (SAMPLES / "claude-code.jsonl").read_text().splitlines()
    assert sum('"id":"msg_0002"' in line for line in lines) == 2  # thinking and text, the same usage twice
    assert counted(claude_code, SAMPLES / "claude-code.jsonl").requests == {"claude-opus-5-5": 3}


def test_a_gemini_message_written_again_and_its_history_rewritten_on_resume_count_once() -> None:
    text = (SAMPLES / "gemini.jsonl").read_text()
    assert text.count('"id":"1c55f9e0-6a86-46fc-ae8c-d9a25a00eec7"') >= 2 and '"$set":{"messages"' in text
    assert counted(gemini, SAMPLES / "gemini.jsonl").requests == {"gemini-3.8-flash": 3}


def stamps(path: Path, kind: str) -> list[str]:
    out = []
    for line in path.read_text().splitlines():
        doc = json.loads(line)
        if kind in (doc.get("type"), (doc.get("payload") or {}).get("type") if isinstance(doc.get("payload"), dict)
                    else None):
            out.append(doc["timestamp"])
    return out


@pytest.mark.parametrize("client, kind", [("claude-code", "user"), ("codex", "task_started"),
                                          ("gemini", "user"), ("copilot", "user.message")])
def test_only_the_answers_inside_the_episodes_window_count(client: str, kind: str) -> None:
    """The sample is two sittings of one session (the resume appends), well inside one second: a window ending
    at the second prompt counts the first sitting's two answers, one starting there the second sitting's one."""
    reader, model, _ = EXPECTED[client]
    path = SAMPLES / f"{client}.jsonl"
    prompts = sorted(stamps(path, kind))
    assert len(prompts) >= 2, prompts
    second = tally.epoch(prompts[-1])
    assert second is not None
    first, then = counted(reader, path, Window(0, second)), counted(reader, path, Window(second, 2**40))
    assert (first.requests, then.requests) == ({model: 2}, {model: 1}), (first, then)


def test_an_older_codex_rollout_counts_the_growth_of_its_running_total(tmp_path: Path) -> None:
    """No token_usage_record lines: a repeated token_count adds nothing, a total that falls starts again."""
    def count_line(at: str, inp: int, cached: int, out: int) -> str:
        return json.dumps({"timestamp": at, "type": "event_msg", "payload": {"type": "token_count", "info": {
            "total_token_usage": {"input_tokens": inp, "cached_input_tokens": cached, "output_tokens": out}}}})

    path = tmp_path / "rollout.jsonl"
    path.write_text("\n".join([
        json.dumps({"timestamp": "2026-12-07T10:00:00.000Z", "type": "turn_context", "payload": {"model": "gpt-5"}}),
        count_line("2026-12-07T10:00:01.000Z", 100, 40, 10),
        count_line("2026-12-07T10:00:01.500Z", 100, 40, 10),  # the same count again
        count_line("2026-12-07T10:00:02.000Z", 250, 90, 30),
        count_line("2026-12-07T10:00:03.000Z", 50, 0, 5),  # a new process counting from zero
    ]) + "\n")
    found = counted(codex, path)
    assert found.models == {"gpt-5": Tokens(input=60 + 100 + 50, output=35, cache_read=90, cache_write=0)}


def test_a_line_that_is_not_json_is_counted_as_skipped_but_a_last_line_being_written_is_not(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    good = (SAMPLES / "claude-code.jsonl").read_text()
    path.write_text('{"type": "assistant", "usage": \n' + good + '{"type":"assistant","message":{"usage"')
    found = counted(claude_code, path)
    assert found.skipped == 1 and found.requests == {"claude-opus-5-5": 3}


def test_a_line_past_the_bound_is_skipped_and_the_lines_after_it_still_count(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tally, "MAX_LINE_BYTES", 4096)
    path = tmp_path / "t.jsonl"
    huge = json.dumps({"type": "user", "message": {"content": "x" * 20_000, "usage": {}}})
    path.write_text(huge + "\n" + (SAMPLES / "claude-code.jsonl").read_text())
    found = counted(claude_code, path)
    assert found.skipped == 1 and found.requests == {"claude-opus-5-5": 3}


def test_a_file_past_its_bound_is_read_to_the_bound_and_says_so(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tally, "MAX_FILE_BYTES", 2048)
    found = counted(claude_code, SAMPLES / "claude-code.jsonl")
    assert found.cut is not None and "only the first" in found.cut


def test_a_codex_session_resumed_days_after_it_started_is_found_in_its_first_days_folder(tmp_path: Path) -> None:
    session = "01a252dc-20bd-7b43-b53f-e4d1b84558ec"
    folder = tmp_path / ".codex" / "sessions" / "2026" / "12" / "01"
    folder.mkdir(parents=True)
    (folder / f"rollout-2026-12-01T09-00-00-{session}.jsonl").write_text("")
    (folder / "rollout-2026-12-01T09-00-00-01a252dc-0000-7b43-b53f-e4d1b84558ec.jsonl").write_text("")
    mine = folder / f"rollout-2026-12-01T09-00-00-{session}.jsonl"
    assert codex.locate(session, {"HOME": str(tmp_path)}, "2026-12-07T10:00:00Z") == [mine]


def test_a_gemini_chat_of_another_session_with_the_same_first_eight_characters_is_not_read(tmp_path: Path) -> None:
    chats = tmp_path / ".gemini" / "tmp" / "repo" / "chats"
    chats.mkdir(parents=True)
    mine, other = "7c0897d1-e04e-43b6-b9ca-b1dc2848b042", "7c0897d1-ffff-43b6-b9ca-b1dc2848b042"
    (chats / "session-2026-12-07T23-35-7c0897d1.jsonl").write_text(json.dumps({"sessionId": other}) + "\n")
    (chats / "session-2026-12-07T23-36-7c0897d1.jsonl").write_text(json.dumps({"sessionId": mine}) + "\n")
    found = gemini.locate(mine, {"HOME": str(tmp_path)}, "2026-12-07T23:36:00Z")
    assert found == [chats / "session-2026-12-07T23-36-7c0897d1.jsonl"]
