"""The providers declaration: every offer has evidence, and the JSON the hook path reads is the YAML's."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from clients.samples import CONNECTION
from majordomus.clients import providers


def test_the_json_form_is_generated_from_the_yaml() -> None:
    assert json.loads(providers.JSON_PATH.read_text()) == yaml.safe_load(providers.YAML_PATH.read_text())


def test_every_offer_of_every_provider_has_evidence() -> None:
    raw = yaml.safe_load(providers.YAML_PATH.read_text())
    assert providers.problems(raw) == []
    for required in ("claude-code", "codex", "gemini", "cursor", "copilot", "generic"):
        assert required in raw["providers"]


def test_an_empty_evidence_is_a_problem_and_the_check_exits_10(tmp_path) -> None:
    raw = yaml.safe_load(providers.YAML_PATH.read_text())
    raw["providers"]["codex"]["evidence"]["prompts"] = ""
    assert "codex: evidence.prompts is empty or too short to be evidence" in providers.problems(raw)
    broken = tmp_path / "providers.yaml"
    broken.write_text(yaml.safe_dump(raw))
    done = subprocess.run([sys.executable, "-m", "majordomus.clients.providers", "--check", str(broken)],
                          capture_output=True)
    assert done.returncode == 10 and b"evidence.prompts is empty" in done.stderr
    shipped = subprocess.run([sys.executable, "-m", "majordomus.clients.providers", "--check"], capture_output=True)
    assert shipped.returncode == 0, shipped.stderr


def test_the_connection_provider_offers_connection_episodes_and_no_prompts() -> None:
    table = providers.load_providers()
    connection = [p for p in table.values() if p.offers["episode"] == "connection"]
    assert [p.name for p in connection] == [CONNECTION]  # SPEC 6: exactly one, and it archives no prompts
    (p,) = connection
    assert p.offers == {"episode": "connection", "prompts": "none", "compaction": "none"}
    assert p.session is None and p.prompt is None and p.install is None
    row = p.session_row()
    assert row is not None and row.deliberate == {"detach", "shutdown"} and row.session_keys == ("session_id",)


@pytest.mark.parametrize("name", sorted(providers.load_providers()))
def test_every_hook_provider_has_an_adapter_for_each_offer(name: str) -> None:
    p = providers.load_providers()[name]
    if p.offers["episode"] == "hooks":
        assert p.session is not None and {"start", "end"} <= set(p.session.events), p.name
        assert all(p.session.events.values()) and p.session.session_keys, p.name
    if p.offers["prompts"] == "hook":
        assert p.prompt is not None and p.prompt.event and p.prompt.text_keys and p.prompt.session_keys, p.name
    if p.offers["episode"] == "hooks" or p.offers["prompts"] == "hook":
        assert p.install is not None, f"{p.name}: an install row (a shape, or unsupported: <why>)"
        assert (p.install.hook_style is None) == (p.install.unsupported is not None), p.name


@pytest.mark.parametrize(("name", "broken", "problem"), [
    ("claude-code", {"hook_style": "sideways"}, "install.hook_style is 'sideways'"),
    ("codex", {"mcp_style": "yaml"}, "install.mcp_style is 'yaml'"),
    ("gemini", {"switch": "enabled"}, "install.switch is 'enabled', not section.key"),
    ("cursor", {"timeout_seconds": 3}, "install.timeout_seconds is not an install key"),
    ("copilot", {"unsupported": "too short"}, "install.unsupported is too short"),
])
def test_a_broken_install_row_is_a_problem(name: str, broken: dict[str, object], problem: str) -> None:
    raw = yaml.safe_load(providers.YAML_PATH.read_text())
    raw["providers"][name]["install"].update(broken)
    assert any(problem in line for line in providers.problems(raw)), providers.problems(raw)


def test_a_hook_provider_without_an_install_row_and_a_connection_provider_with_one_are_problems() -> None:
    raw = yaml.safe_load(providers.YAML_PATH.read_text())
    hook = next(n for n, b in raw["providers"].items() if b["offers"]["prompts"] == "hook")
    shape = raw["providers"][hook].pop("install")
    raw["providers"][CONNECTION]["install"] = shape
    found = providers.problems(raw)
    assert f"{hook}: offers hooks but has no install row (a shape, or unsupported: <why>)" in found
    assert f"{CONNECTION}: a connection provider is wired by its MCP entry alone; remove its install row" in found


def test_a_session_event_may_name_several_client_events() -> None:
    raw = yaml.safe_load(providers.YAML_PATH.read_text())
    several = [n for n, b in raw["providers"].items()
               if any(isinstance(v, list) for v in ((b.get("session") or {}).get("events") or {}).values())]
    for name in several:
        p = providers.load_providers()[name]
        assert p.session is not None
        for ours, theirs in raw["providers"][name]["session"]["events"].items():
            assert p.session.events[ours] == (tuple(theirs) if isinstance(theirs, list) else (theirs,))
    raw["providers"]["claude-code"]["session"]["events"]["start"] = []
    raw["providers"]["claude-code"]["session"]["events"]["pause"] = "Pause"
    found = providers.problems(raw)
    assert "claude-code: session.events.start must name one client event or a list of them" in found
    assert "claude-code: session.events.pause is not one of start, end, compact, turn" in found


def test_the_resumable_clients_declare_their_resume_command_with_evidence() -> None:
    table = providers.load_providers()
    commands = {name: p.resume.command for name, p in table.items() if p.resume is not None}
    assert commands == {"claude-code": "claude --resume {session}", "codex": "codex resume {session}",
                        "gemini": "gemini --resume {session}", "copilot": "copilot --resume={session}",
                        "cline": "cline --id {session}", "qwen-code": "qwen --resume {session}"}
    assert all(len(table[n].resume.evidence) >= 25 for n in commands)  # type: ignore[union-attr]
    assert table["claude-code"].resume.line("a b") == "claude --resume 'a b'"  # type: ignore[union-attr]


@pytest.mark.parametrize(("broken", "problem"), [
    ({"command": "claude --resume"}, "resume.command must name {session} exactly once"),
    ({"evidence": ""}, "resume.evidence is empty or too short"),
    ({"shell": "bash"}, "resume.shell is not a resume key"),
])
def test_a_broken_resume_row_is_a_problem(broken: dict[str, str], problem: str) -> None:
    raw = yaml.safe_load(providers.YAML_PATH.read_text())
    raw["providers"]["claude-code"]["resume"].update(broken)
    assert any(problem in line for line in providers.problems(raw)), providers.problems(raw)
