"""`capture status` through the real executable: one row per provider and aspect, states earned on evidence."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from clients.samples import CONNECTION, DECLARED, INSTALLABLE, SAMPLES, UNINSTALLABLE
from majordomus.clients.providers import load_providers

STATES = {"unsupported", "unadapted", "unconfigured", "named", "wired", "verified"}


def status_rows(run_majordomus, repo: Path, env: dict[str, str] | None = None) -> dict[tuple[str, str], dict[str, Any]]:
    done = run_majordomus("capture", "status", "--json", cwd=repo, env=env)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["schema"] == "majordomus.capture-status/v1"
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for row in doc["providers"]:
        key = (row["provider"], row["aspect"])
        assert key not in rows, f"two rows for {key}"
        rows[key] = row
    return rows


def layer_snapshot(repo: Path) -> dict[str, bytes]:
    """Every file under .ai/, by path: a dry run must leave this byte for byte."""
    return {str(p.relative_to(repo)): p.read_bytes() for p in sorted((repo / ".ai").rglob("*")) if p.is_file()}


def test_every_declared_provider_and_aspect_has_exactly_one_row_with_evidence(initialised_repo: Path,
                                                                              run_majordomus) -> None:
    rows = status_rows(run_majordomus, initialised_repo)
    declared = {(name, aspect) for name in load_providers() for aspect in ("session", "prompt")}
    assert set(rows) == declared
    for key, row in rows.items():
        assert set(row) == {"provider", "aspect", "capability", "state", "reason", "evidence"}
        assert row["state"] in STATES, key
        assert len(row["evidence"]) > 24, key
        assert row["reason"], key


def test_the_connection_session_is_verified_by_a_real_dry_run_that_writes_nothing(initialised_repo: Path,
                                                                                   run_majordomus) -> None:
    before = layer_snapshot(initialised_repo)
    done = run_majordomus("capture", "status", cwd=initialised_repo)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.decode().splitlines()
    assert any(re.match(rf"^{CONNECTION}:session +connection +verified +\S", line) for line in lines), lines
    assert layer_snapshot(initialised_repo) == before
    assert not list((initialised_repo / ".ai/local/state/sessions-open").iterdir())
    assert not (initialised_repo / ".ai/local/state/ledger.jsonl").exists()


def test_text_rows_put_capability_before_state_in_aligned_columns(initialised_repo: Path, run_majordomus) -> None:
    lines = run_majordomus("capture", "status", cwd=initialised_repo).stdout.decode().splitlines()
    assert len(lines) == 2 * len(load_providers())
    starts = {re.search(r"\s(unsupported|unadapted|unconfigured|named|wired|verified)\s", ln).start() for ln in lines}
    assert len(starts) == 1, "the state column is not aligned"


def test_the_connection_session_is_not_verified_without_a_layer(git_repo: Path, run_majordomus) -> None:
    row = status_rows(run_majordomus, git_repo)[(CONNECTION, "session")]
    assert row["state"] == "wired"
    assert "majordomus init" in row["reason"]


def test_an_aspect_declared_none_is_unsupported_and_one_install_cannot_wire_says_why(initialised_repo: Path,
                                                                                     run_majordomus) -> None:
    rows = status_rows(run_majordomus, initialised_repo)
    for (name, aspect), row in rows.items():
        offer = DECLARED[name].offers["episode" if aspect == "session" else "prompts"]
        if offer == "none":
            assert (row["state"], row["capability"]) == ("unsupported", "none"), (name, aspect)
    for name in UNINSTALLABLE:
        install = DECLARED[name].install
        assert install is not None and install.unsupported
        for aspect in ("session", "prompt"):
            row = rows[(name, aspect)]
            if row["capability"] != "none":
                assert row["state"] == "unadapted", (name, aspect)
                assert "capture install cannot wire it" in row["reason"] and install.unsupported in row["reason"]


@pytest.mark.parametrize("name", INSTALLABLE)
def test_a_client_is_unconfigured_until_install_wires_it(initialised_repo: Path, run_majordomus, name: str) -> None:
    rows = status_rows(run_majordomus, initialised_repo)
    assert rows[(name, "session")]["state"] == "unconfigured"
    assert f"capture install --provider {name}" in rows[(name, "session")]["reason"]
    assert run_majordomus("capture", "install", "--provider", name, cwd=initialised_repo).returncode == 0
    before = layer_snapshot(initialised_repo)
    rows = status_rows(run_majordomus, initialised_repo)
    assert rows[(name, "session")]["state"] == "verified"  # its own command line, dry-run
    assert rows[(name, "prompt")]["state"] in {"wired", "verified"}
    assert all(row["state"] == "unconfigured" for (other, _), row in rows.items() if other in INSTALLABLE
               and other != name and DECLARED[other].config != DECLARED[name].config)
    assert layer_snapshot(initialised_repo) == before


def test_a_configuration_that_does_not_call_majordomus_is_named(initialised_repo: Path, run_majordomus) -> None:
    settings = initialised_repo / ".claude/settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "echo hi"}]}]}}))
    row = status_rows(run_majordomus, initialised_repo)[("claude-code", "session")]
    assert row["state"] == "named"
    assert "SessionStart" in row["reason"]


@pytest.mark.parametrize("name", INSTALLABLE)
def test_a_configuration_naming_a_missing_executable_is_named_not_wired(initialised_repo: Path, run_majordomus,
                                                                       name: str) -> None:
    assert run_majordomus("capture", "install", "--provider", name, cwd=initialised_repo).returncode == 0
    config = DECLARED[name].config
    assert config
    key = SAMPLES[name]["wired"]["command_key"]
    install_row = DECLARED[name].install
    hooks = initialised_repo / ((install_row.local_config if install_row else None) or config)
    text = hooks.read_text()
    hooks.write_text(text.replace(f'"{key}": "/', f'"{key}": "/nonexistent/').replace(
        f'"{key}": "majordomus ', f'"{key}": "/nonexistent/majordomus '))
    assert hooks.read_text() != text
    row = status_rows(run_majordomus, initialised_repo)[(name, "session")]
    assert row["state"] == "named"
    assert "not an executable" in row["reason"]


def test_a_shared_file_naming_majordomus_by_name_is_named_when_this_path_lacks_it(initialised_repo: Path,
                                                                                   run_majordomus) -> None:
    assert run_majordomus("capture", "install", "--provider", "codex", cwd=initialised_repo).returncode == 0
    assert status_rows(run_majordomus, initialised_repo)[("codex", "session")]["state"] == "verified"
    env = {**os.environ, "PATH": "/usr/bin:/bin"}
    row = status_rows(run_majordomus, initialised_repo, env=env)[("codex", "session")]
    assert row["state"] == "named"
    assert "not an executable on this PATH" in row["reason"] and "put majordomus on the PATH" in row["reason"]
