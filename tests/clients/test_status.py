"""`capture status` through the real executable: one row per provider and aspect, states earned on evidence."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from clients.samples import CONNECTION, DECLARED, INSTALLABLE, UNINSTALLABLE
from majordomus.clients.hook_command import SHARED_HEAD
from majordomus.clients.providers import load_providers
from support import MAJORDOMUS_HOOK

STATES = {"unsupported", "unadapted", "unconfigured", "named", "wired", "verified", "untrusted"}


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


def codex_keys(repo: Path) -> list[str]:
    """Codex's trust keys for majordomus's handlers: <absolute hooks.json>:<snake event>:<group>:<handler>."""
    doc = json.loads((repo / ".codex/hooks.json").read_text())
    path = os.path.realpath(repo / ".codex/hooks.json")
    keys = []
    for event, groups in doc["hooks"].items():
        snake = re.sub(r"(?<!^)([A-Z])", r"_\1", event).lower()
        for i, group in enumerate(groups):
            keys += [f"{path}:{snake}:{i}:{j}" for j, h in enumerate(group["hooks"]) if "majordomus" in h["command"]]
    return keys


def trust_everything(repo: Path, codex_hooks: bool = True) -> None:
    """What a person does in each client's trust dialog, as each client stores it (REAL-CLIENTS.md)."""
    home = Path(os.environ["HOME"])
    place = os.path.realpath(repo)
    (home / ".codex").mkdir(exist_ok=True)
    text = f'[projects.{json.dumps(place)}]\ntrust_level = "trusted"\n'
    if codex_hooks and (repo / ".codex/hooks.json").exists():
        text += "".join(f'\n[hooks.state.{json.dumps(k)}]\ntrusted_hash = "sha256:00"\n' for k in codex_keys(repo))
    (home / ".codex/config.toml").write_text(text)
    (home / ".gemini").mkdir(exist_ok=True)
    (home / ".gemini/trustedFolders.json").write_text(json.dumps({place: "TRUST_FOLDER"}))
    (home / ".copilot").mkdir(exist_ok=True)
    (home / ".copilot/config.json").write_text(json.dumps({"trustedFolders": [place]}))


def layer_snapshot(repo: Path) -> dict[str, bytes]:
    """Every file under .ai/, by path: a dry run must leave this byte for byte."""
    return {str(p.relative_to(repo)): p.read_bytes() for p in sorted((repo / ".ai").rglob("*")) if p.is_file()}


def test_every_declared_provider_and_aspect_has_exactly_one_row_with_evidence(initialised_repo: Path,
                                                                              run_majordomus) -> None:
    rows = status_rows(run_majordomus, initialised_repo)
    declared = {(name, aspect) for name in load_providers() for aspect in ("session", "prompt")}
    assert set(rows) == declared
    for key, row in rows.items():
        assert set(row) == {"provider", "aspect", "capability", "state", "reason", "evidence", "last_event"}
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
    trust_everything(initialised_repo)
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
    install_row = DECLARED[name].install
    hooks = initialised_repo / ((install_row.local_config if install_row else None) or config)
    text = hooks.read_text()
    gone = "/nonexistent/majordomus-hook"
    head = re.escape(json.dumps(SHARED_HEAD)[1:-1])  # the shared form, as the file holds it: its words, by a path
    shared = re.compile(head + r'(.*?) 2>/dev/null;; \*\) .*?; esac; exit 0')
    hooks.write_text(shared.sub(lambda m: f"[ -x {gone} ] || exit 0; {gone} {m[1]} 2>/dev/null; exit 0",
                                text.replace(str(MAJORDOMUS_HOOK), gone)))
    assert hooks.read_text() != text
    row = status_rows(run_majordomus, initialised_repo)[(name, "session")]
    assert row["state"] == "named"
    assert "not an executable" in row["reason"]


def test_a_shared_file_naming_majordomus_by_name_is_named_when_this_path_lacks_it(initialised_repo: Path,
                                                                                   run_majordomus) -> None:
    assert run_majordomus("capture", "install", "--provider", "codex", cwd=initialised_repo).returncode == 0
    trust_everything(initialised_repo)
    assert status_rows(run_majordomus, initialised_repo)[("codex", "session")]["state"] == "verified"
    env = {**os.environ, "PATH": "/usr/bin:/bin"}
    row = status_rows(run_majordomus, initialised_repo, env=env)[("codex", "session")]
    assert row["state"] == "named"
    assert "not an executable on this PATH" in row["reason"] and "put majordomus on the PATH" in row["reason"]


TRUSTED_BY_FILE = ("codex", "gemini", "copilot")  # the clients whose trust store is a file majordomus can read


@pytest.mark.parametrize("name", TRUSTED_BY_FILE)
def test_a_client_whose_trust_store_refuses_these_hooks_is_untrusted_not_verified(initialised_repo: Path,
                                                                                run_majordomus, name: str) -> None:
    """SPEC §6: `verified` proves majordomus's half only; a client that will not run the hooks says so."""
    assert run_majordomus("capture", "install", "--provider", name, cwd=initialised_repo).returncode == 0
    rows = status_rows(run_majordomus, initialised_repo)
    for aspect in ("session", "prompt"):
        row = rows[(name, aspect)]
        assert row["state"] == "untrusted", (aspect, row)
        assert "majordomus's half: " in row["reason"] and "reached the real path" in row["reason"]
    trust_everything(initialised_repo)
    assert {status_rows(run_majordomus, initialised_repo)[(name, a)]["state"] for a in ("session", "prompt")} == \
        {"verified"}


def test_codex_trusting_the_project_but_not_reviewing_these_hooks_is_untrusted_and_another_clones_review_does_not_count(
        initialised_repo: Path, tmp_path: Path, run_majordomus) -> None:
    assert run_majordomus("capture", "install", "--provider", "codex", cwd=initialised_repo).returncode == 0
    trust_everything(initialised_repo, codex_hooks=False)
    row = status_rows(run_majordomus, initialised_repo)[("codex", "session")]
    assert row["state"] == "untrusted" and "Hooks need review" in row["reason"] and "SessionStart" in row["reason"]
    config = Path(os.environ["HOME"]) / ".codex/config.toml"
    elsewhere = [k.replace(os.path.realpath(initialised_repo), str(tmp_path / "other-clone")) for k in
                 codex_keys(initialised_repo)]
    config.write_text(config.read_text() + "".join(f'\n[hooks.state.{json.dumps(k)}]\ntrusted_hash = "sha256:00"\n'
                                                   for k in elsewhere))
    assert status_rows(run_majordomus, initialised_repo)[("codex", "session")]["state"] == "untrusted"
    config.unlink()
    row = status_rows(run_majordomus, initialised_repo)[("codex", "session")]
    assert row["state"] == "untrusted" and "has reviewed no hook here" in row["reason"]


def test_gemini_folder_rules_the_most_specific_wins_and_folder_trust_off_means_trusted(initialised_repo: Path,
                                                                                     run_majordomus) -> None:
    assert run_majordomus("capture", "install", "--provider", "gemini", cwd=initialised_repo).returncode == 0
    gemini = Path(os.environ["HOME"]) / ".gemini"
    gemini.mkdir()
    place = Path(os.path.realpath(initialised_repo))

    def state(rules: dict[str, str]) -> str:
        (gemini / "trustedFolders.json").write_text(json.dumps(rules))
        return status_rows(run_majordomus, initialised_repo)[("gemini", "session")]["state"]

    assert state({str(place.parent): "TRUST_FOLDER"}) == "verified"
    assert state({str(place.parent): "TRUST_FOLDER", str(place): "DO_NOT_TRUST"}) == "untrusted"
    assert state({str(place / "sub"): "TRUST_PARENT"}) == "verified"
    assert state({str(place.parent / "elsewhere"): "TRUST_FOLDER"}) == "untrusted"
    (gemini / "settings.json").write_text(json.dumps({"security": {"folderTrust": {"enabled": False}}}))
    assert state({}) == "verified"


def test_qwen_folder_rules_count_only_once_its_settings_turn_folder_trust_on(initialised_repo: Path,
                                                                           run_majordomus) -> None:
    """Qwen Code 0.24.4 checks ~/.qwen/trustedFolders.json only with security.folderTrust.enabled true (off by
    default); then an untrusted folder runs no project hook, with Gemini CLI's rules (the most specific wins)."""
    assert run_majordomus("capture", "install", "--provider", "qwen-code", cwd=initialised_repo).returncode == 0
    qwen = Path(os.environ["HOME"]) / ".qwen"
    qwen.mkdir()
    place = Path(os.path.realpath(initialised_repo))

    def state(rules: dict[str, str]) -> str:
        (qwen / "trustedFolders.json").write_text(json.dumps(rules))
        return status_rows(run_majordomus, initialised_repo)[("qwen-code", "session")]["state"]

    assert state({str(place.parent / "elsewhere"): "TRUST_FOLDER"}) == "verified"  # folder trust off
    (qwen / "settings.json").write_text(json.dumps({"security": {"folderTrust": {"enabled": True}}}))
    assert state({str(place.parent / "elsewhere"): "TRUST_FOLDER"}) == "untrusted"
    assert state({str(place.parent): "TRUST_FOLDER", str(place): "DO_NOT_TRUST"}) == "untrusted"
    assert state({str(place / "sub"): "TRUST_PARENT"}) == "verified"
    assert state({str(place): "TRUST_FOLDER"}) == "verified"


def test_each_row_says_when_a_real_event_from_the_client_last_reached_capture_here(initialised_repo: Path,
                                                                                  run_majordomus) -> None:
    assert run_majordomus("capture", "install", "--provider", "claude-code", cwd=initialised_repo).returncode == 0
    rows = status_rows(run_majordomus, initialised_repo)
    for aspect in ("session", "prompt"):
        assert rows[("claude-code", aspect)]["last_event"] is None
        assert "no real event from it has reached capture here yet" in rows[("claude-code", aspect)]["reason"]
    started = run_majordomus("capture", "session", "--provider", "claude-code", "--event", "start",
                             cwd=initialised_repo,
                             input=json.dumps({"session_id": "s-1", "source": "startup"}).encode())
    assert started.returncode == 0, started.stderr
    rows = status_rows(run_majordomus, initialised_repo)
    at = rows[("claude-code", "session")]["last_event"]
    assert at and re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", at) and f"last real event here {at}" in \
        rows[("claude-code", "session")]["reason"]
    assert rows[("claude-code", "prompt")]["last_event"] is None and rows[("codex", "session")]["last_event"] is None
    prompt = run_majordomus("capture", "prompt", "--provider", "claude-code", cwd=initialised_repo,
                            input=json.dumps({"session_id": "s-1", "prompt": "tidy the module"}).encode())
    assert prompt.returncode == 0, prompt.stderr
    assert status_rows(run_majordomus, initialised_repo)[("claude-code", "prompt")]["last_event"]
