"""`majordomus export --otlp`: the real executable sends episodes drawn by the real hooks to a loopback OTLP/HTTP
receiver, which decodes them with the official opentelemetry-proto messages; every span, event, attribute and
log record is checked against the records on disk."""

from __future__ import annotations

import json
import os
import socket
import stat
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import RunMajordomus, git
from otlp_receiver import Receiver, attributes
from support import front_matter

SECRET = "PLUM-OTTER-7731"  # a recognisable word of a prompt text, never on the wire without --with-prompts
CREDENTIAL = "Zx81kd02kdkLLqw0ss9"
CURSOR = ".ai/local/state/otlp-cursor.json"


class World:
    def __init__(self, repo: Path, run: RunMajordomus) -> None:
        self.repo = repo
        self.run = run

    def ok(self, *args: str, payload: dict[str, str] | None = None) -> str:
        done = self.run(*args, cwd=self.repo, input=json.dumps(payload or {}).encode())
        assert done.returncode == 0, (args, done.stderr.decode())
        return done.stderr.decode()

    def hook(self, ps: str, event: str, **extra: str) -> str:
        return self.ok("capture", "session", "--provider", "claude-code", "--event", event,
                       payload={"session_id": ps, **extra})

    def prompt(self, ps: str, pid: str, text: str) -> None:
        self.ok("capture", "prompt", "--provider", "claude-code",
                payload={"session_id": ps, "prompt_id": pid, "prompt": text})

    def export(self, *args: str, env: dict[str, str] | None = None, timeout: float = 60) -> Any:
        return self.run("export", "--otlp", *args, cwd=self.repo, env=env, timeout=timeout)


@pytest.fixture
def world(initialised_repo: Path, run_majordomus: RunMajordomus) -> World:
    """A closed episode (two prompts, a compaction, a finished turn, a commit), an interrupted one (one prompt,
    its turn still running), and one still open."""
    w = World(initialised_repo, run_majordomus)
    w.hook("c1", "start", source="startup")
    w.prompt("c1", "p1", f"rename the parser, {SECRET}, api_key = '{CREDENTIAL}'")
    (w.repo / "parser.py").write_text("x = 1\n")
    git(w.repo, "add", "parser.py")
    git(w.repo, "commit", "-q", "-m", "rename the parser")
    w.hook("c1", "compact", trigger="auto")
    w.prompt("c1", "p2", "now the tests")
    w.hook("c1", "turn")
    assert "(closed" in w.hook("c1", "end", reason="prompt_input_exit")
    w.hook("c2", "start", source="startup")
    w.prompt("c2", "p3", "explain the ledger")
    assert "(interrupted" in w.hook("c2", "end", reason="other")
    w.hook("c3", "start", source="startup")
    return w


def closed_records(repo: Path) -> dict[str, dict[str, Any]]:
    return {m["session_id"]: m for m in (front_matter(p) for p in (repo / ".ai/repo/sessions").glob("2*.md"))}


def prompt_records(repo: Path) -> dict[str, dict[str, Any]]:
    return {json.loads(p.read_text())["id"]: json.loads(p.read_text())
            for p in (repo / ".ai/local/prompts").glob("*.json")}


def nanos(at: str) -> int:
    from datetime import datetime, timezone

    return int(datetime.strptime(at, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()) * 10**9


def test_each_ended_episode_is_one_span_and_each_prompt_one_log_record_checked_against_the_records(
        world: World) -> None:
    records = closed_records(world.repo)
    assert len(records) == 2
    prompts = prompt_records(world.repo)
    with Receiver() as rx:
        done = world.export(rx.url)
        assert done.returncode == 0, done.stderr.decode()
        assert "sent 2 episode span(s) and 3 prompt log record(s)" in done.stderr.decode()
    spans = rx.spans()
    assert len(spans) == 2
    repository = next(iter(records.values()))["repository_id"]
    from majordomus import __version__

    for resource, _ in spans + rx.log_records():
        assert resource == {"service.name": "majordomus", "service.version": __version__,
                            "majordomus.repository.id": repository}
    by_episode = {attributes(s.attributes)["session.id"]: s for _, s in spans}
    assert set(by_episode) == set(records)
    for episode, record in records.items():
        span = by_episode[episode]
        attrs = attributes(span.attributes)
        assert span.name == "episode claude-code" and span.kind == 1  # SPAN_KIND_INTERNAL
        assert span.start_time_unix_nano == nanos(record["started_at"])
        assert span.end_time_unix_nano == nanos(record["closed_at"])
        assert len(span.trace_id) == 16 and len(span.span_id) == 8 and not span.parent_span_id
        expected = {
            "session.id": episode, "gen_ai.provider.name": "anthropic", "gen_ai.agent.name": "claude-code",
            "vcs.ref.head.name": record["branch"], "vcs.ref.head.revision": record["head"],
            "vcs.ref.base.revision": record["start_head"], "majordomus.repository.id": repository,
            "majordomus.worktree.id": record["worktree_id"], "majordomus.episode.outcome": record["outcome"],
            "majordomus.episode.end_reason": record["end_reason"], "majordomus.episode.last_turn": record["last_turn"],
            "majordomus.episode.compactions": record["compactions"],
            "majordomus.episode.commits": len(record["commits"]),
            "majordomus.episode.changed_files": len(record["changed_files"]),
            "majordomus.usage.state": "missing",  # no Claude Code transcript in this world's HOME
        }
        client = {"c1": "c1", "c2": "c2"}[next(p["session"] for p in prompts.values() if p["episode"] == episode)]
        assert attrs == {**expected, "gen_ai.conversation.id": client}
        mine = sorted((p for p in prompts.values() if p["episode"] == episode), key=lambda p: p["started_at"])
        turns = [e for e in span.events if e.name == "majordomus.turn"]
        assert [attributes(e.attributes) for e in turns] == [
            {"majordomus.turn.number": n} for n in range(1, len(mine) + 1)]
        assert [e.time_unix_nano for e in turns] == [nanos(p["started_at"]) for p in mine]
        compactions = [e for e in span.events if e.name == "majordomus.compaction"]
        assert [attributes(e.attributes) for e in compactions] == [
            {"majordomus.compaction.number": n, "majordomus.compaction.time_known": True}
            for n in range(1, record["compactions"] + 1)]
        assert len(span.events) == len(turns) + len(compactions)
        if record["outcome"] == "interrupted":
            assert (span.status.code, span.status.message) == (2, record["end_reason"])  # STATUS_CODE_ERROR
        else:
            assert span.status.code == 1  # STATUS_CODE_OK
    closed = next(e for e, r in records.items() if r["outcome"] == "closed")
    assert records[closed]["compactions"] == 1 and len(records[closed]["commits"]) == 1
    logs = rx.log_records()
    assert len(logs) == 3
    for _, log in logs:
        attrs = attributes(log.attributes)
        prompt = next(p for p in prompts.values() if p["episode"] == attrs["session.id"]
                      and len(p["text"]) == attrs["majordomus.prompt.length"])
        assert log.time_unix_nano == nanos(prompt["started_at"]) and log.event_name == "majordomus.prompt"
        assert log.body.WhichOneof("value") is None  # an empty body: no text
        assert log.trace_id == by_episode[prompt["episode"]].trace_id
        assert log.span_id == by_episode[prompt["episode"]].span_id
        redacted = [k for k in (prompt.get("redacted") or "").split(",") if k]
        assert {k: v for k, v in attrs.items() if k != "log.record.uid"} == {
            "session.id": prompt["episode"], "gen_ai.conversation.id": prompt["session"],
            "gen_ai.provider.name": "anthropic", "gen_ai.agent.name": "claude-code",
            "majordomus.repository.id": repository, "majordomus.worktree.id": prompt["worktree_id"],
            "vcs.ref.head.name": prompt["branch"], "majordomus.prompt.episode_link": prompt["episode_link"],
            "majordomus.prompt.length": len(prompt["text"]), "majordomus.prompt.redacted": redacted,
            "majordomus.prompt.redactions": len(redacted), "majordomus.prompt.pruned": False}
    assert len({attributes(x.attributes)["log.record.uid"] for _, x in logs}) == 3
    wire = b"".join(body for _, body in rx.raw)
    assert SECRET.encode() not in wire and CREDENTIAL.encode() not in wire and b"now the tests" not in wire


def test_a_second_run_sends_only_what_ended_since_and_the_cursor_is_private(world: World) -> None:
    with Receiver() as rx:
        assert world.export(rx.url).returncode == 0
        first = {bytes(s.span_id) for _, s in rx.spans()}
        cursor = world.repo / CURSOR
        assert stat.S_IMODE(cursor.stat().st_mode) == 0o600
        again = world.export(rx.url)
        assert again.returncode == 0 and "sent 0 episode span(s) and 0 prompt log record(s)" in again.stderr.decode()
        assert "(2 episode(s) and 3 prompt(s) accepted before)" in again.stderr.decode()
        world.prompt("c3", "p4", "one more")
        world.hook("c3", "end", reason="other")
        third = world.export(rx.url)
        assert third.returncode == 0 and "sent 1 episode span(s) and 1 prompt log record(s)" in third.stderr.decode()
    ids = [bytes(s.span_id) for _, s in rx.spans()]
    assert len(ids) == len(set(ids)) == 3 and first < set(ids)
    uids = [attributes(x.attributes)["log.record.uid"] for _, x in rx.log_records()]
    assert len(uids) == len(set(uids)) == 4
    assert stat.S_IMODE((world.repo / CURSOR).stat().st_mode) == 0o600


def test_with_prompts_sends_the_redacted_text_only(world: World) -> None:
    with Receiver() as rx:
        assert world.export(rx.url, "--with-prompts").returncode == 0
    bodies = {x.body.string_value for _, x in rx.log_records()}
    assert any(SECRET in b and "[redacted:" in b for b in bodies) and "now the tests" in bodies
    wire = b"".join(body for _, body in rx.raw)
    assert SECRET.encode() in wire and CREDENTIAL.encode() not in wire


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_failing_endpoint_loses_nothing_and_after_it_recovers_nothing_is_sent_twice(world: World) -> None:
    env = {"OTEL_EXPORTER_OTLP_TIMEOUT": "2"}
    with Receiver() as rx:
        rx.mode = "500"
        done = world.export(rx.url, env=env)
        assert done.returncode == 13, done.stderr.decode()
        err = done.stderr.decode()
        assert f"{rx.url}/v1/traces did not accept the export" in err and "500" in err
        assert "sent 0 episode span(s)" in err and "Traceback" not in err
        assert not (world.repo / CURSOR).exists()
        rx.mode = "400"  # a 4xx is not retried: refused at once
        done = world.export(rx.url, env=env)
        assert done.returncode == 13 and "400" in done.stderr.decode()
        assert not (world.repo / CURSOR).exists()
        rx.mode = "503"  # retried with backoff, but never past the timeout
        started = time.monotonic()
        done = world.export(rx.url, env=env)
        assert done.returncode == 13 and time.monotonic() - started < 2 + 5
        rx.mode, rx.delay = "slow", 4.0
        started = time.monotonic()
        done = world.export(rx.url, env={"OTEL_EXPORTER_OTLP_TIMEOUT": "1"})
        assert done.returncode == 13 and time.monotonic() - started < 4 + 3
        rx.mode = "ok"
        done = world.export(rx.url, env=env)
        assert done.returncode == 0 and "sent 2 episode span(s) and 3 prompt log record(s)" in done.stderr.decode()
        assert world.export(rx.url, env=env).returncode == 0
    dead = f"http://127.0.0.1:{free_port()}"
    started = time.monotonic()
    refused = world.export(dead, env=env)
    assert refused.returncode == 13 and time.monotonic() - started < 2 + 5
    assert f"{dead}/v1/traces did not accept the export" in refused.stderr.decode()
    assert len(rx.spans()) == 2 and len(rx.log_records()) == 3  # every record once, none twice
    cursor = json.loads((world.repo / CURSOR).read_text())["accepted"]
    assert sorted(cursor) == [f"{rx.url}/v1/logs", f"{rx.url}/v1/traces"]


def test_the_refused_logs_after_accepted_spans_are_sent_next_time_and_the_spans_are_not(world: World) -> None:
    with Receiver() as rx:
        traces_only = {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{rx.url}/v1/traces",
                       "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": f"http://127.0.0.1:{free_port()}/v1/logs",
                       "OTEL_EXPORTER_OTLP_TIMEOUT": "2"}
        done = world.export(env=traces_only)
        assert done.returncode == 13 and "sent 2 episode span(s) and 0 prompt" in done.stderr.decode()
        done = world.export(env={"OTEL_EXPORTER_OTLP_ENDPOINT": rx.url})
        assert done.returncode == 0 and "sent 0 episode span(s) and 3 prompt log record(s)" in done.stderr.decode()
    assert len(rx.spans()) == 2 and len(rx.log_records()) == 3


def test_dry_run_prints_what_would_be_sent_and_sends_nothing(world: World) -> None:
    with Receiver() as rx:
        done = world.export(rx.url, "--dry-run")
        assert done.returncode == 0
        lines = done.stdout.decode().splitlines()
        assert [ln.split()[0] for ln in lines] == ["span", "span", "log", "log", "log"]
        assert any(" interrupted (other) " in ln for ln in lines)
        assert "would send 2 episode span(s) and 3 prompt log record(s)" in done.stderr.decode()
        as_json = world.run("--json", "export", "--otlp", rx.url, "--dry-run", cwd=world.repo)
        items = [json.loads(ln) for ln in as_json.stdout.decode().splitlines()]
        assert [i["signal"] for i in items] == ["span", "span", "log", "log", "log"]
        assert all(i["body"] is None for i in items if i["signal"] == "log")
        assert SECRET not in done.stdout.decode() + as_json.stdout.decode()
        assert rx.raw == [] and not (world.repo / CURSOR).exists()


def test_the_standard_variables_give_the_endpoint_and_its_headers_which_no_file_keeps(world: World) -> None:
    with Receiver() as rx:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": rx.url,
               "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20tok-5511,x-team=agents"}
        done = world.export(env=env)
        assert done.returncode == 0, done.stderr.decode()
        world.prompt("c3", "p4", "one more")
        with_user = world.export(rx.url.replace("http://", "http://user:hunter2@"))
        assert with_user.returncode == 0 and "hunter2" not in with_user.stderr.decode()
        assert "sent 0 episode span(s) and 1 prompt log record(s)" in with_user.stderr.decode()  # the same cursor
    assert {h.get("x-team") for h in rx.headers[:2]} == {"agents"}
    assert {h.get("authorization") for h in rx.headers[:2]} == {"Bearer tok-5511"}
    kept = (world.repo / CURSOR).read_text()
    assert "tok-5511" not in kept and "hunter2" not in kept and "user" not in kept
    assert rx.url + "/v1/traces" in kept


def test_without_an_endpoint_or_with_a_bad_one_it_says_what_to_give(world: World) -> None:
    env = {k: "" for k in os.environ if k.startswith("OTEL_EXPORTER_OTLP")}
    done = world.export(env=env)
    assert done.returncode == 2 and b"needs an endpoint" in done.stderr
    done = world.export("localhost:4318")
    assert done.returncode == 2 and b"is not an OTLP/HTTP URL" in done.stderr
    done = world.export("http://localhost:4318", "--format", "json")
    assert done.returncode == 2 and b"takes no ids, filters" in done.stderr


def test_without_the_otlp_extra_it_names_the_install(world: World, tmp_path: Path) -> None:
    blocked = tmp_path / "blocked" / "opentelemetry"
    blocked.mkdir(parents=True)
    (blocked / "__init__.py").write_text("raise ImportError('not installed')\n")
    done = world.export("http://127.0.0.1:9", env={"PYTHONPATH": str(blocked.parent)})
    assert done.returncode == 12
    assert done.stderr.decode().strip().endswith("run pip install 'majordomus[otlp]'")
    assert b"Traceback" not in done.stderr
    dry = world.export("http://127.0.0.1:9", "--dry-run", env={"PYTHONPATH": str(blocked.parent)})
    assert dry.returncode == 0  # the dry run needs no opentelemetry
