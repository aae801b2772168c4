"""The providers declaration: every offer has evidence, and the JSON the hook path reads is the YAML's."""

from __future__ import annotations

import json
import subprocess
import sys

import yaml

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
    done = subprocess.run([sys.executable, "-m", "majordomus.clients.providers", "--check", str(broken)], capture_output=True)
    assert done.returncode == 10 and b"evidence.prompts is empty" in done.stderr
    shipped = subprocess.run([sys.executable, "-m", "majordomus.clients.providers", "--check"], capture_output=True)
    assert shipped.returncode == 0, shipped.stderr


def test_generic_offers_connection_episodes_and_no_prompts() -> None:
    generic = providers.load_providers()["generic"]
    assert generic.offers == {"episode": "connection", "prompts": "none", "compaction": "none"}
    row = generic.session_row()
    assert row is not None and row.deliberate == {"detach", "shutdown"} and row.session_keys == ("session_id",)


def test_every_hook_provider_has_an_adapter_for_each_offer() -> None:
    for p in providers.load_providers().values():
        if p.offers["episode"] == "hooks":
            assert p.session is not None and {"start", "end"} <= set(p.session.events), p.name
        if p.offers["prompts"] == "hook" and p.name != "windsurf":
            assert p.prompt is not None and p.prompt.text_keys, p.name
