"""The shared server's background OTLP export, when policy.yaml's `telemetry:` says so (off by default), and the
policy key checked like every other: doctor names a broken one, and a credential in the shared file keeps it off."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from conftest import RunMajordomus
from mcp_support import McpProcess, wait_for
from otlp_receiver import Receiver
from support import hook


def write_telemetry(repo: Path, block: object) -> None:
    path = repo / ".ai/repo/policy.yaml"
    data = yaml.safe_load(path.read_text()) or {}
    data["telemetry"] = block
    path.write_text(yaml.safe_dump(data))


def doctor_lines(repo: Path, run: RunMajordomus) -> list[str]:
    done = run("doctor", cwd=repo)
    return [ln for ln in done.stdout.decode().splitlines() if " policy " in ln]


def test_the_shared_server_exports_the_ended_episodes_in_the_background(initialised_repo: Path,
                                                                        run_majordomus: RunMajordomus) -> None:
    repo = initialised_repo
    for ps in ("b1", "b2"):
        assert hook(repo, "start", {"session_id": ps, "source": "startup"}).returncode == 0
        assert hook(repo, "end", {"session_id": ps, "reason": "other"}).returncode == 0
    with Receiver() as rx:
        write_telemetry(repo, {"otlp_endpoint": rx.url, "interval_seconds": 10})
        assert any(f"telemetry: the shared server exports the ended episodes to {rx.url} every 10 s" in ln
                   for ln in doctor_lines(repo, run_majordomus))
        with McpProcess(repo, "--http-port", "0") as server:
            server.url()
            server.wait_stderr("telemetry: sent 2 episode span(s) and 0 prompt log record(s)", timeout=30)
            wait_for(lambda: len(rx.spans()) == 2, 10, "two spans")
        assert all(h.get("content-type") == "application/x-protobuf" for h in rx.headers)
    assert len({bytes(s.span_id) for _, s in rx.spans()}) == 2
    cursor = json.loads((repo / ".ai/local/state/otlp-cursor.json").read_text())
    assert len(cursor["accepted"][f"{rx.url}/v1/traces"]) == 2


def test_without_the_telemetry_key_the_shared_server_sends_nothing(initialised_repo: Path) -> None:
    repo = initialised_repo
    assert hook(repo, "start", {"session_id": "q1", "source": "startup"}).returncode == 0
    assert hook(repo, "end", {"session_id": "q1", "reason": "other"}).returncode == 0
    with Receiver() as rx, McpProcess(repo, "--http-port", "0") as server:
        server.url()
        server.wait_stderr("listening on http://")
        assert "telemetry" not in server.stderr and rx.raw == []
    assert not (repo / ".ai/local/state/otlp-cursor.json").exists()


def test_a_broken_telemetry_key_is_a_doctor_failure_and_keeps_the_export_off(initialised_repo: Path,
                                                                            run_majordomus: RunMajordomus) -> None:
    cases = [
        ({"otlp_endpoint": "https://user:s3cret@otel.example.com:4318"}, "must not carry credentials"),
        ({"otlp_endpoint": "otel.example.com:4318"}, "must be an http:// or https:// base URL"),
        ({"otlp_endpoint": "http://otel.example.com:4318", "interval_seconds": 1}, "interval_seconds must be"),
        ({"otlp_endpoint": "http://otel.example.com:4318", "headers": "x"}, "unknown key(s) headers"),
        ("http://otel.example.com:4318", "telemetry must be a mapping"),
    ]
    for block, expected in cases:
        write_telemetry(initialised_repo, block)
        lines = doctor_lines(initialised_repo, run_majordomus)
        assert any(ln.startswith("FAIL") and expected in ln for ln in lines), (block, lines)
        assert not any("exports the ended episodes" in ln for ln in lines), lines
