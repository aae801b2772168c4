"""`capture install` through the real executable, for every hook client: merges, keeps foreign entries,
is idempotent, writes the client's own timeout unit, refuses what it cannot parse, and what it writes works."""

from __future__ import annotations

import json
import os
import shlex
import stat
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest

from clients.samples import (
    CONNECTION,
    DECLARED,
    INSTALLABLE,
    SAMPLES,
    UNINSTALLABLE,
    WIREABLE,
    first_end,
    session_bytes,
)
from majordomus.clients.hook_command import parse
from majordomus.clients.providers import Provider, get_provider
from support import MAJORDOMUS, MAJORDOMUS_HOOK, MAJORDOMUS_MCP, open_files, records

# Foreign content a person already has in the MCP file, by file type (each client's hook file: samples.yaml `foreign`).
FOREIGN_MCP_JSON = {"mcpServers": {"other": {"type": "stdio", "command": "other-server", "args": ["--x"]}},
                    "inputs": [{"id": "token"}]}
FOREIGN_TOML = ('model = "o3"  # a comment that must survive\n\n[mcp_servers.other]\ncommand = "other-server"\n'
                'args = ["--x"]\n\n[features]\nweb_search = true\n')


def install(repo: Path, provider: str, umask: int | None = None) -> subprocess.CompletedProcess[bytes]:
    argv = [str(MAJORDOMUS), "capture", "install", "--provider", provider]
    if umask is not None:
        argv = ["sh", "-c", f"umask {umask:03o}; exec {shlex.join(argv)}"]
    return subprocess.run(argv, cwd=repo, capture_output=True, timeout=60, check=False)


def seed(repo: Path, provider: Provider) -> dict[str, bytes]:
    """Write the foreign files; returns their bytes by relative path."""
    files: dict[str, bytes] = {}
    assert provider.config
    files[provider.config] = json.dumps(SAMPLES[provider.name]["foreign"], indent=4).encode()
    if provider.mcp_config and provider.mcp_config != provider.config:
        files[provider.mcp_config] = (FOREIGN_TOML.encode() if provider.mcp_config.endswith(".toml")
                                      else json.dumps(FOREIGN_MCP_JSON, indent=2).encode())
    for rel, data in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_bytes(data)
    return files


def handlers(doc: dict[str, Any], event: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for entry in doc.get("hooks", {}).get(event, []):
        out.extend(entry["hooks"] if "hooks" in entry else [entry])
    return out


def command_of(handler: dict[str, Any], name: str) -> str:
    return handler[SAMPLES[name]["wired"]["command_key"]]


def hooks_rel(provider: Provider) -> str:
    rel = provider.hooks_file()
    assert rel
    return rel


def exe_word(provider: Provider) -> str:
    """The launcher a hook command runs: this machine's path only in a per-person file, else the bare name."""
    local = provider.install is not None and provider.install.local_config
    return str(MAJORDOMUS_HOOK) if local else MAJORDOMUS_HOOK.name


def runs(command: str) -> list[str]:
    """The executable and the words a hook command of ours runs, whatever its fail-open guard."""
    found = parse(command)
    assert found is not None, command
    return [found.executable, *found.words]


def our_handler(repo: Path, provider: Provider, event: str) -> dict[str, Any]:
    doc = json.loads((repo / hooks_rel(provider)).read_text())
    mine = [h for h in handlers(doc, event) if "majordomus" in command_of(h, provider.name)]
    assert len(mine) == 1, (event, handlers(doc, event))
    return mine[0]


def mcp_entry(repo: Path, provider: Provider) -> dict[str, Any]:
    assert provider.mcp_config
    text = (repo / provider.mcp_config).read_text()
    if provider.mcp_config.endswith(".toml"):
        return tomllib.loads(text)["mcp_servers"]["majordomus"]
    return json.loads(text)["mcpServers"]["majordomus"]


@pytest.mark.parametrize("name", INSTALLABLE)
def test_install_merges_into_existing_files_and_keeps_every_foreign_entry(initialised_repo: Path, name: str) -> None:
    provider = get_provider(name)
    seeded = seed(initialised_repo, provider)
    done = install(initialised_repo, name)
    assert done.returncode == 0, done.stderr
    assert provider.config
    doc = json.loads((initialised_repo / provider.config).read_text())
    foreign_hooks = SAMPLES[name]["foreign"]
    for key, value in foreign_hooks.items():
        if key != "hooks":
            assert all(doc[key][k] == v for k, v in value.items()) if isinstance(value, dict) else doc[key] == value
    for event, entries in foreign_hooks["hooks"].items():
        kept = [command_of(h, name) for h in handlers(doc, event)]
        for foreign in handlers({"hooks": {event: entries}}, event):
            assert command_of(foreign, name) in kept
    for rel, data in seeded.items():
        if rel.endswith(".toml"):
            before, after = tomllib.loads(data.decode()), tomllib.loads((initialised_repo / rel).read_text())
            assert after["model"] == "o3" and after["mcp_servers"]["other"] == before["mcp_servers"]["other"]
            assert after["features"] == {"web_search": True}  # no deprecated codex_hooks written
            assert "# a comment that must survive" in (initialised_repo / rel).read_text()
        elif rel != provider.config:
            after_doc = json.loads((initialised_repo / rel).read_text())
            assert after_doc["mcpServers"]["other"] == FOREIGN_MCP_JSON["mcpServers"]["other"]
            assert after_doc["inputs"] == FOREIGN_MCP_JSON["inputs"]
    assert provider.install is not None
    if provider.install.switch is not None:  # a person's other keys in the switch's section stay beside it
        section, key = provider.install.switch
        assert doc[section] == {**foreign_hooks.get(section, {}), key: True}
    assert mcp_entry(initialised_repo, provider)["command"] == MAJORDOMUS_MCP.name  # a shared file: by name
    assert hooks_rel(provider).encode() in done.stdout


@pytest.mark.parametrize("name", INSTALLABLE)
def test_install_writes_each_event_with_an_explicit_timeout_in_the_clients_own_unit(initialised_repo: Path,
                                                                                   name: str) -> None:
    provider = get_provider(name)
    assert install(initialised_repo, name).returncode == 0
    assert provider.session is not None and provider.prompt is not None
    wired = SAMPLES[name]["wired"]
    timeout_key = wired["timeout_key"]
    for ours, events in provider.session.events.items():
        for event in events:
            handler = our_handler(initialised_repo, provider, event)
            assert runs(command_of(handler, name)) == [exe_word(provider), "capture", "session",
                                                       "--provider", name, "--event", ours]
            assert isinstance(handler[timeout_key], int)
    for event in provider.session.events["end"]:
        assert our_handler(initialised_repo, provider, event)[timeout_key] == wired["end_timeout"]
    prompt = our_handler(initialised_repo, provider, provider.prompt.event)
    assert runs(command_of(prompt, name))[1:] == ["capture", "prompt", "--provider", name]
    assert prompt[timeout_key] == wired["prompt_timeout"]


@pytest.mark.parametrize("name", INSTALLABLE)
def test_a_second_install_changes_no_byte_and_says_so(initialised_repo: Path, name: str) -> None:
    provider = get_provider(name)
    seed(initialised_repo, provider)
    assert install(initialised_repo, name).returncode == 0
    files = [f for f in (provider.config, provider.mcp_config) if f]
    before = {rel: (initialised_repo / rel).read_bytes() for rel in files}
    again = install(initialised_repo, name)
    assert again.returncode == 0, again.stderr
    assert b"nothing to change" in again.stdout
    assert {rel: (initialised_repo / rel).read_bytes() for rel in files} == before


@pytest.mark.parametrize("name", INSTALLABLE)
def test_a_config_that_is_not_valid_json_is_refused_and_left_untouched(initialised_repo: Path, name: str) -> None:
    provider = get_provider(name)
    assert provider.config
    path = initialised_repo / provider.config
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b'{"hooks": {"SessionStart": [\n')
    done = install(initialised_repo, name)
    assert done.returncode == 15
    assert provider.config.encode() in done.stderr and b"not valid JSON" in done.stderr
    assert path.read_bytes() == b'{"hooks": {"SessionStart": [\n'
    if provider.mcp_config and provider.mcp_config != provider.config:
        assert not (initialised_repo / provider.mcp_config).exists()  # nothing is written when one file is refused


def test_a_codex_config_toml_that_does_not_parse_is_refused_and_left_untouched(initialised_repo: Path) -> None:
    path = initialised_repo / ".codex/config.toml"
    path.parent.mkdir()
    path.write_bytes(b"model = \n[features\n")
    done = install(initialised_repo, "codex")
    assert done.returncode == 15
    assert b"not valid TOML" in done.stderr
    assert path.read_bytes() == b"model = \n[features\n"
    assert not (initialised_repo / ".codex/hooks.json").exists()


def test_a_duplicate_key_is_refused_rather_than_one_copy_dropped(initialised_repo: Path) -> None:
    path = initialised_repo / ".mcp.json"
    path.write_bytes(b'{"mcpServers": {"a": {"command": "x"}}, "mcpServers": {"b": {"command": "y"}}}')
    done = install(initialised_repo, "claude-code")
    assert done.returncode == 15
    assert b"twice" in done.stderr


def test_a_symlinked_config_is_refused_and_its_target_untouched(initialised_repo: Path, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.json"
    target.write_text("{}")
    (initialised_repo / ".claude").mkdir()
    (initialised_repo / ".claude/settings.json").symlink_to(target)
    done = install(initialised_repo, "claude-code")
    assert done.returncode == 15
    assert b"symbolic link" in done.stderr
    assert target.read_text() == "{}"


@pytest.mark.parametrize("name", INSTALLABLE)
def test_umask_000_makes_nothing_world_writable(initialised_repo: Path, name: str) -> None:
    done = install(initialised_repo, name, umask=0)
    assert done.returncode == 0, done.stderr
    provider = get_provider(name)
    for rel in (hooks_rel(provider), provider.mcp_config):
        assert rel
        path = initialised_repo
        for part in Path(rel).parts:
            path = path / part
            mode = stat.S_IMODE(path.stat().st_mode)
            assert not mode & 0o022, f"{path} is {mode:o}"


def test_the_connection_providers_install_writes_nothing_and_says_how_to_register_the_server(
        initialised_repo: Path) -> None:
    before = sorted(p.name for p in initialised_repo.iterdir())
    done = install(initialised_repo, CONNECTION)
    assert done.returncode == 0, done.stderr
    assert str(MAJORDOMUS_MCP).encode() in done.stdout
    assert sorted(p.name for p in initialised_repo.iterdir()) == before


@pytest.mark.parametrize("name", UNINSTALLABLE)
def test_a_provider_install_cannot_wire_is_refused_with_exit_12_and_its_sentence(initialised_repo: Path,
                                                                                  name: str) -> None:
    provider = get_provider(name)
    before = sorted(p.name for p in initialised_repo.iterdir())
    done = install(initialised_repo, name)
    assert done.returncode == 12
    stderr = done.stderr.decode()
    assert provider.install is not None and provider.install.unsupported
    assert provider.install.unsupported.rstrip(".") in stderr  # says why, as the declaration does
    assert f"wire one of: {', '.join([*WIREABLE, CONNECTION])}" in stderr
    assert sorted(p.name for p in initialised_repo.iterdir()) == before


@pytest.mark.parametrize("name", INSTALLABLE)
def test_the_installed_hook_command_line_opens_and_closes_a_real_episode(initialised_repo: Path, name: str) -> None:
    """1. install the client; 2. read the start and end command lines back from its own configuration;
    3. run each through a shell, as the client would, with the client's real payload on stdin.
    The episode opens under the client's provider, and its end gives the outcome its reason means; the hook
    says nothing to the person on either stream."""
    provider = get_provider(name)
    assert install(initialised_repo, name).returncode == 0
    assert provider.session is not None
    # a per-person file names this machine's launcher, so it needs no PATH; a shared file names it by name
    local = exe_word(provider) != MAJORDOMUS_HOOK.name
    env = {**os.environ, "PATH": "/usr/bin:/bin" if local else f"{MAJORDOMUS.parent}:/usr/bin:/bin"}
    start = command_of(our_handler(initialised_repo, provider, provider.session.events["start"][0]), name)
    done = subprocess.run(["sh", "-c", start], cwd=initialised_repo, input=session_bytes(name, "start", f"{name}-1"),
                          env=env, capture_output=True, timeout=60, check=False)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    (opened,) = open_files(initialised_repo).values()
    assert opened["provider"] == name and opened["provider_session"] == f"{name}-1"
    reason, outcome = first_end(name)
    end = command_of(our_handler(initialised_repo, provider, provider.session.events["end"][0]), name)
    payload = session_bytes(name, "end", f"{name}-1", reason)
    done = subprocess.run(["sh", "-c", end], cwd=initialised_repo, input=payload,
                          env=env, capture_output=True, timeout=60, check=False)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    (record,) = records(initialised_repo).values()
    assert record["outcome"] == outcome and record["end_reason"] == reason and record["provider"] == name


def test_an_out_of_date_majordomus_entry_is_updated_in_place_not_duplicated(initialised_repo: Path) -> None:
    provider = get_provider("claude-code")
    assert install(initialised_repo, "claude-code").returncode == 0
    settings = initialised_repo / ".claude/settings.local.json"
    settings.write_text(settings.read_text().replace(str(MAJORDOMUS_HOOK), "/old/venv/bin/majordomus-hook"))
    done = install(initialised_repo, "claude-code")
    assert done.returncode == 0, done.stderr
    assert b"updated" in done.stdout
    assert provider.session is not None
    for events in provider.session.events.values():
        for event in events:
            command = command_of(our_handler(initialised_repo, provider, event), "claude-code")
            assert runs(command)[0] == str(MAJORDOMUS_HOOK)


def test_an_empty_existing_file_is_merged_into_as_an_empty_object(initialised_repo: Path) -> None:
    (initialised_repo / ".mcp.json").write_text("  \n")
    done = install(initialised_repo, "claude-code")
    assert done.returncode == 0, done.stderr
    assert json.loads((initialised_repo / ".mcp.json").read_text())["mcpServers"]["majordomus"]["type"] == "stdio"


def test_a_codex_hooks_flag_a_person_switched_off_is_left_alone_and_said(initialised_repo: Path) -> None:
    path = initialised_repo / ".codex/config.toml"
    path.parent.mkdir()
    path.write_bytes(b"# mine\r\n[features]\r\ncodex_hooks = false\r\n")
    done = install(initialised_repo, "codex")
    assert done.returncode == 0, done.stderr
    assert b"switched off" in done.stdout
    text = path.read_bytes()
    assert tomllib.loads(text.decode())["features"] == {"codex_hooks": False}
    assert b"\r\n" in text and b"\n" not in text.replace(b"\r\n", b"")  # a CRLF file stays CRLF


@pytest.mark.parametrize(("before", "after"), [
    (b"model = \"o3\"\n\n[features]\ncodex_hooks = true\n", {"model": "o3"}),
    (b"[features]\ncodex_hooks = true\nweb_search = true\n", {"features": {"web_search": True}}),
])
def test_the_deprecated_codex_hooks_key_an_earlier_install_wrote_is_removed_and_said(
        initialised_repo: Path, before: bytes, after: dict[str, object]) -> None:
    path = initialised_repo / ".codex/config.toml"
    path.parent.mkdir()
    path.write_bytes(before)
    done = install(initialised_repo, "codex")
    assert done.returncode == 0, done.stderr
    assert b"removed features.codex_hooks (deprecated" in done.stdout
    found = tomllib.loads(path.read_text())
    found.pop("mcp_servers")
    assert found == after
    again = install(initialised_repo, "codex")
    assert again.returncode == 0 and b"codex_hooks" not in again.stdout
    assert tomllib.loads(path.read_text()) == {**after, "mcp_servers": tomllib.loads(path.read_text())["mcp_servers"]}


APPROVING = [n for n in INSTALLABLE if (row := DECLARED[n].install) is not None and row.approve]


def test_every_client_with_a_consent_step_says_it() -> None:
    assert {"claude-code", "codex", "gemini", "copilot"} <= set(APPROVING)


@pytest.mark.parametrize("name", APPROVING)
def test_install_says_what_the_person_must_approve_in_the_client_on_every_run(initialised_repo: Path,
                                                                               name: str) -> None:
    """The client's consent is not a file majordomus can write, so install says it, each time."""
    provider = DECLARED[name]
    assert provider.install is not None
    for _ in range(2):  # the first run writes, the second has nothing to change: both say it
        done = install(initialised_repo, name)
        assert done.returncode == 0, done.stderr
        lines = done.stdout.decode().splitlines()
        for sentence in provider.install.approve:
            assert f"approve in {provider.title}: {sentence}" in lines, lines


def shared_files(repo: Path) -> list[str]:
    """Every file git would share: tracked, or untracked and not ignored."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=repo,
                            capture_output=True, check=True, timeout=30).stdout
    return [name for name in listed.decode().split("\0") if name]


@pytest.mark.parametrize("name", INSTALLABLE)
def test_no_file_teammates_get_through_git_names_a_path_of_this_machine(initialised_repo: Path, name: str) -> None:
    """SPEC §7: what names this machine's majordomus is in the client's per-person file, kept out of git."""
    provider = get_provider(name)
    done = install(initialised_repo, name)
    assert done.returncode == 0, done.stderr
    machine = [str(MAJORDOMUS.parent), str(initialised_repo), str(Path.home())]
    wired = {hooks_rel(provider), provider.mcp_config}
    shared = shared_files(initialised_repo)
    for rel in shared:
        text = (initialised_repo / rel).read_bytes().decode("utf-8", "replace")
        assert not [m for m in machine if m in text], f"{rel} names a path of this machine"
    assert provider.mcp_config in shared
    out = done.stdout.decode()
    assert "teammates: " in out
    local = provider.install.local_config if provider.install is not None else None
    if local:  # the per-person file holds the path, is ignored by git, and install says each teammate runs it
        assert local not in shared and str(MAJORDOMUS) in (initialised_repo / local).read_text()
        assert subprocess.run(["git", "check-ignore", "-q", local], cwd=initialised_repo).returncode == 0
        assert f"capture install --provider {name}` once after cloning" in out
    else:
        assert wired <= set(shared)


def test_hooks_an_earlier_install_put_in_claude_codes_shared_settings_move_to_its_local_file(
        initialised_repo: Path) -> None:
    provider = get_provider("claude-code")
    shared = initialised_repo / ".claude/settings.json"
    shared.parent.mkdir()
    foreign = {"type": "command", "command": "echo keep-me", "timeout": 3}
    old = {"type": "command", "command": f"{MAJORDOMUS} capture session --provider claude-code --event start",
           "timeout": 10}
    shared.write_text(json.dumps({"model": "x", "hooks": {"SessionStart": [{"hooks": [old]}, {"hooks": [foreign]}],
                                                          "Stop": [{"matcher": "", "hooks": [old | {
                                                              "command": f"{MAJORDOMUS} capture session "
                                                                         "--provider claude-code --event turn"},
                                                              foreign]}]}}))
    done = install(initialised_repo, "claude-code")
    assert done.returncode == 0, done.stderr
    assert b".claude/settings.json: removed majordomus's hooks SessionStart, Stop" in done.stdout
    after = json.loads(shared.read_text())
    assert after == {"model": "x", "hooks": {"SessionStart": [{"hooks": [foreign]}],
                                             "Stop": [{"matcher": "", "hooks": [foreign]}]}}
    assert provider.session is not None
    for events in provider.session.events.values():
        for event in events:
            assert runs(command_of(our_handler(initialised_repo, provider, event), "claude-code"))[0] == \
                str(MAJORDOMUS_HOOK)
    again = install(initialised_repo, "claude-code")
    assert b"nothing to change" in again.stdout and json.loads(shared.read_text()) == after


def test_install_says_when_the_name_the_shared_files_use_is_not_on_this_path(initialised_repo: Path) -> None:
    env = {**os.environ, "PATH": "/usr/bin:/bin"}
    done = subprocess.run([str(MAJORDOMUS), "capture", "install", "--provider", "codex"], cwd=initialised_repo,
                          env=env, capture_output=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "note: majordomus-hook is not on PATH here" in done.stdout.decode()
    assert str(MAJORDOMUS.parent) in done.stdout.decode()
