"""An episode's usage through the real executables: hook episodes drawn by `majordomus capture session`, the
client's record where the client writes it under HOME, then `episodes`, `show`, `search`, `export` and
`export --otlp --dry-run`, each as a person runs it."""

from __future__ import annotations

import json
import os
import stat
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from conftest import RunMajordomus

SONNET = "claude-sonnet-4-5-20250929"


class World:
    def __init__(self, repo: Path, run: RunMajordomus) -> None:
        self.repo, self.run = repo, run
        self.home = Path(os.environ["HOME"])

    def ok(self, *args: str, payload: dict[str, Any] | None = None) -> str:
        done = self.run(*args, cwd=self.repo, input=json.dumps(payload or {}).encode())
        assert done.returncode == 0, (args, done.stderr.decode())
        return done.stdout.decode() + done.stderr.decode()

    def hook(self, ps: str, event: str, provider: str = "claude-code", **extra: str) -> str:
        return self.ok("capture", "session", "--provider", provider, "--event", event,
                       payload={"session_id": ps, **extra})

    def transcript(self, ps: str) -> Path:
        return self.home / ".claude" / "projects" / "-work-repo" / f"{ps}.jsonl"

    def answer(self, ps: str, msg: str, model: str, tokens: tuple[int, int, int, int], lines: int = 1) -> None:
        """What Claude Code writes of one answer of its model, now: `lines` lines (one per content block)."""
        path = self.transcript(ps)
        path.parent.mkdir(parents=True, exist_ok=True)
        inp, out, read, write = tokens
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        line = {"type": "assistant", "sessionId": ps, "timestamp": now,
                "message": {"id": msg, "model": model, "role": "assistant",
                            "usage": {"input_tokens": inp, "output_tokens": out, "cache_read_input_tokens": read,
                                      "cache_creation_input_tokens": write}}}
        with path.open("a") as f:
            f.write("".join(json.dumps(line) + "\n" for _ in range(lines)))

    def episodes(self) -> list[dict[str, Any]]:
        return json.loads(self.ok("--json", "episodes"))["episodes"]  # type: ignore[no-any-return]

    def usage(self, episode: str) -> dict[str, Any]:
        return next(e["usage"] for e in self.episodes() if e["id"] == episode)


def opened(line: str) -> str:
    return line.split()[1]


@pytest.fixture
def world(initialised_repo: Path, run_majordomus: RunMajordomus) -> World:
    return World(initialised_repo, run_majordomus)


def test_an_ended_episode_shows_the_tokens_and_cost_of_its_clients_record(world: World) -> None:
    sid = opened(world.hook("c1", "start", source="startup"))
    world.answer("c1", "msg_1", SONNET, (10, 100, 2000, 400), lines=2)  # two content blocks, one answer
    world.answer("c1", "msg_2", SONNET, (5, 50, 1000, 0))
    world.hook("c1", "end", reason="prompt_input_exit")
    usage = world.usage(sid)
    assert usage["state"] == "counted" and usage["note"] is None
    assert (usage["input_tokens"], usage["output_tokens"], usage["cache_read_tokens"],
            usage["cache_write_tokens"]) == (15, 150, 3000, 400)
    want = (15 * 3 + 150 * 15 + 3000 * 0.3 + 400 * 3.75) / 1e6
    assert usage["cost_usd"] == pytest.approx(want) and usage["cost"] == f"${want:.4f}"
    assert [(m["model"], m["requests"], m["price"]) for m in usage["models"]] == [
        (SONNET, 2, {"as_of": "2025-12-01", "source": "table"})]
    line = next(x for x in world.ok("episodes").splitlines() if x.startswith(sid))
    assert "  3.6k  " in line and f"${want:.4f}" in line
    shown = world.ok("show", sid)
    assert "tokens       3,565: input 15 · output 150 · cache read 3,000 · cache write 400" in shown
    assert f"{SONNET}: 2 request(s), 3,565 tokens, ${want:.4f} at the table's price of 2025-12-01" in shown


def test_an_open_episode_says_its_usage_is_read_once_it_ends_and_a_connection_episode_that_it_has_none(
        world: World) -> None:
    sid = opened(world.hook("c1", "start", source="startup"))
    world.answer("c1", "msg_1", SONNET, (1, 2, 3, 4))
    usage = world.usage(sid)
    assert usage["state"] == "pending" and "once it ends" in usage["note"] and usage["cost"] is None
    line = next(x for x in world.ok("episodes").splitlines() if x.startswith(sid))
    assert line.split()[8:10] == ["-", "-"], line  # the tokens and cost columns
    gid = opened(world.hook("g1", "start", provider="generic", source="attach"))
    world.hook("g1", "end", provider="generic", reason="detach")
    usage = world.usage(gid)
    assert usage["state"] == "unsupported" and "never reaches majordomus" in usage["note"]


def test_a_missing_record_says_where_it_was_looked_for(world: World) -> None:
    sid = opened(world.hook("gone", "start", source="startup"))
    world.hook("gone", "end", reason="other")
    usage = world.usage(sid)
    assert usage["state"] == "missing" and usage["cost_usd"] is None
    assert usage["note"] == "no Claude Code record of session gone was found at ~/.claude/projects/*/<session>.jsonl"


def test_an_unknown_model_says_price_unknown_and_a_policy_row_prices_it(world: World) -> None:
    sid = opened(world.hook("c1", "start", source="startup"))
    world.answer("c1", "msg_1", "claude-opus-5-5", (1000, 100, 0, 0))
    world.hook("c1", "end", reason="prompt_input_exit")
    usage = world.usage(sid)
    assert usage["cost_usd"] is None and usage["cost"] == "price unknown"
    assert usage["models"][0]["price"] is None and usage["models"][0]["cost_usd"] is None
    assert "price unknown" in next(x for x in world.ok("episodes").splitlines() if x.startswith(sid))
    policy = world.repo / ".ai/repo/policy.yaml"
    policy.write_text(policy.read_text() + "usage:\n  prices:\n    claude-opus-5-5: {input: 5, output: 25}\n")
    priced = world.usage(sid)
    assert priced["cost_usd"] == pytest.approx((1000 * 5 + 100 * 25) / 1e6)
    assert priced["models"][0]["price"] == {"as_of": "policy", "source": "policy"}


def test_a_broken_price_row_is_a_doctor_finding_and_the_table_still_prices(world: World) -> None:
    policy = world.repo / ".ai/repo/policy.yaml"
    policy.write_text(policy.read_text() + "usage:\n  prices:\n    my-model: {input: cheap, output: 2}\n")
    done = world.run("doctor", cwd=world.repo)
    out = done.stdout.decode()
    assert "usage.prices.my-model.input must be a number of dollars per 1M tokens" in out, out
    sid = opened(world.hook("c1", "start", source="startup"))
    world.answer("c1", "msg_1", SONNET, (1, 1, 0, 0))
    world.hook("c1", "end", reason="prompt_input_exit")
    assert world.usage(sid)["cost_usd"] == pytest.approx(18 / 1e6)


def test_the_count_is_kept_private_and_made_again_when_the_record_changes(world: World) -> None:
    sid = opened(world.hook("c1", "start", source="startup"))
    world.answer("c1", "msg_1", SONNET, (1, 1, 0, 0))
    world.hook("c1", "end", reason="prompt_input_exit")
    assert world.usage(sid)["input_tokens"] == 1
    kept = world.repo / ".ai/local/state/usage.json"
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600 and sid in json.loads(kept.read_text())["episodes"]
    path = world.transcript("c1")
    lines = path.read_text().splitlines()
    doc = json.loads(lines[0])
    doc["message"]["id"] = "msg_2"  # a line the client wrote late, inside the episode's window
    path.write_text(lines[0] + "\n" + json.dumps(doc) + "\n")
    assert world.usage(sid)["input_tokens"] == 2


def test_a_damaged_line_is_said_and_the_rest_counted(world: World) -> None:
    sid = opened(world.hook("c1", "start", source="startup"))
    world.answer("c1", "msg_1", SONNET, (7, 1, 0, 0))
    with world.transcript("c1").open("a") as f:
        f.write('{"type": "assistant", "message": {"usage": BROKEN\n')
    world.answer("c1", "msg_2", SONNET, (3, 1, 0, 0))
    world.hook("c1", "end", reason="prompt_input_exit")
    usage = world.usage(sid)
    assert usage["state"] == "counted" and usage["input_tokens"] == 10
    assert usage["note"].startswith("1 entry of ") and "was not what Claude Code writes" in usage["note"]


def test_a_resumed_session_counts_each_sittings_answers_in_its_own_episode(world: World) -> None:
    """Two sittings of one client session, the second opened within the second the first closed in."""
    first = opened(world.hook("c1", "start", source="startup"))
    world.answer("c1", "msg_1", SONNET, (1, 1, 0, 0))
    world.hook("c1", "end", reason="prompt_input_exit")
    second = opened(world.hook("c1", "start", source="resume"))
    world.answer("c1", "msg_2", SONNET, (100, 1, 0, 0))
    world.hook("c1", "end", reason="prompt_input_exit")
    assert first != second
    assert (world.usage(first)["input_tokens"], world.usage(second)["input_tokens"]) == (1, 100)


def test_search_and_the_export_carry_the_episodes_usage(world: World) -> None:
    sid = opened(world.hook("c1", "start", source="startup"))
    world.ok("capture", "prompt", "--provider", "claude-code",
             payload={"session_id": "c1", "prompt_id": "p1", "prompt": "tune the tokenizer"})
    world.answer("c1", "msg_1", SONNET, (10, 100, 2000, 400))
    world.hook("c1", "end", reason="prompt_input_exit")
    found = json.loads(world.ok("--json", "search", "tokenizer"))["results"]
    assert found and found[0]["episode"] == sid and found[0]["episode_usage"]["output_tokens"] == 100
    assert "2.5k tokens $0.0036" in world.ok("search", "tokenizer")
    page = world.ok("export", "--format", "html")
    assert "· 2.5k tokens · $0.0036" in page
    assert "**cost**: $0.0036" in world.ok("export", "--format", "md")


def test_the_otlp_span_carries_the_genai_usage_attributes(world: World) -> None:
    sid = opened(world.hook("c1", "start", source="startup"))
    world.answer("c1", "msg_1", SONNET, (10, 100, 2000, 400))
    world.hook("c1", "end", reason="prompt_input_exit")
    done = world.run("--json", "export", "--otlp", "http://127.0.0.1:9", "--dry-run", cwd=world.repo)
    assert done.returncode == 0, done.stderr.decode()
    (span,) = [json.loads(x) for x in done.stdout.decode().splitlines() if '"signal": "span"' in x]
    a = span["attributes"]
    assert a["session.id"] == sid
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (2410, 100)
    assert (a["gen_ai.usage.cache_read.input_tokens"], a["gen_ai.usage.cache_creation.input_tokens"]) == (2000, 400)
    assert a["gen_ai.request.model"] == SONNET and a["majordomus.usage.cost_usd"] == pytest.approx(0.00363)
    time.sleep(0)  # nothing waits: the spans are built from the files alone


def test_a_session_id_that_is_no_file_name_is_never_made_into_a_path(world: World) -> None:
    """A hook's payload names the client session; `../..` in it must not send the reader out of the client's
    folder (here: to a transcript planted two levels up, which would be counted)."""
    planted = world.home / ".claude" / "evil.jsonl"
    planted.parent.mkdir(parents=True, exist_ok=True)
    world.answer("x", "msg_1", SONNET, (5, 5, 0, 0))
    world.transcript("x").rename(planted)
    sid = opened(world.hook("../../evil", "start", source="startup"))
    world.hook("../../evil", "end", reason="prompt_input_exit")
    usage = world.usage(sid)
    assert usage["state"] == "unknown-session" and "is not a name a client's file can have" in usage["note"]
