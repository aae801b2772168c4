"""`capture install` for a client whose hooks are executables named after their events (Cline's
`.clinerules/hooks/TaskStart`, …), through the real executables.

Each file install writes runs as the client runs it (the interpreter its shebang names, the payload on stdin):
with majordomus on PATH it records, without it it does nothing and says nothing, and either way it exits 0 and
prints `{"cancel": false}`, the client's "no opinion". A person's own hook of the same name is refused and left
byte-identical; uninstall gives back a byte-identical tree.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from clients.samples import DECLARED, EXECUTABLE_HOOKS, session_bytes
from clients.test_uninstall import tree
from majordomus.clients.install import wanted_hooks
from support import BIN_DIR, MAJORDOMUS, open_files, records

SYSTEM_PATH = "/usr/bin:/bin"


def majordomus(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(MAJORDOMUS), *args], cwd=repo, capture_output=True, text=True, timeout=60,
                          check=False)


def hooks_dir(name: str) -> str:
    folder = DECLARED[name].config
    assert folder
    return folder


def run_as_the_client(script: Path, repo: Path, payload: bytes, path: str) -> subprocess.CompletedProcess[bytes]:
    """The way Cline runs a hook file: the shebang's interpreter with the file's path, the payload on stdin."""
    shebang = script.read_bytes().splitlines()[0].decode()
    assert shebang.startswith("#!")
    return subprocess.run([*shebang[2:].split(), str(script)], cwd=repo, input=payload, capture_output=True,
                          timeout=60, env={**os.environ, "PATH": path}, check=False)


@pytest.mark.parametrize("name", EXECUTABLE_HOOKS)
def test_install_writes_one_executable_per_event_that_prints_no_opinion(initialised_repo: Path,
                                                                        name: str) -> None:
    done = majordomus(initialised_repo, "capture", "install", "--provider", name)
    assert done.returncode == 0, done.stderr
    folder = initialised_repo / hooks_dir(name)
    events = sorted(w.client_event for w in wanted_hooks(DECLARED[name]))
    assert sorted(p.name for p in folder.iterdir()) == events
    for script in folder.iterdir():
        assert script.stat().st_mode & 0o777 == 0o755, script
        assert script.read_bytes().startswith(b"#!/bin/sh\n")
        assert b'-IS "$l" capture' in script.read_bytes()  # the launcher found on PATH, started isolated
    assert "MCP" in done.stdout  # where the client reads its MCP servers, since install cannot write it


@pytest.mark.parametrize("name", EXECUTABLE_HOOKS)
def test_the_installed_executables_record_and_answer_no_opinion(initialised_repo: Path, name: str) -> None:
    assert majordomus(initialised_repo, "capture", "install", "--provider", name).returncode == 0
    folder = initialised_repo / hooks_dir(name)
    row = DECLARED[name].session
    assert row is not None
    path = f"{BIN_DIR}{os.pathsep}{SYSTEM_PATH}"
    start = run_as_the_client(folder / row.events["start"][0], initialised_repo,
                              session_bytes(name, "start", f"{name}-ps"), path)
    assert start.returncode == 0 and start.stderr == b""
    assert json.loads(start.stdout) == {"cancel": False}
    (opened,) = open_files(initialised_repo).values()
    assert opened["provider"] == name and opened["provider_session"] == f"{name}-ps"
    end = run_as_the_client(folder / row.events["end"][0], initialised_repo,
                            session_bytes(name, "end", f"{name}-ps", "session_shutdown"), path)
    assert json.loads(end.stdout) == {"cancel": False}
    assert open_files(initialised_repo) == {}
    (record,) = records(initialised_repo).values()
    assert record["outcome"] == "interrupted"


@pytest.mark.parametrize("name", EXECUTABLE_HOOKS)
def test_the_executables_fail_open_where_majordomus_is_not_on_path(initialised_repo: Path, name: str) -> None:
    assert majordomus(initialised_repo, "capture", "install", "--provider", name).returncode == 0
    assert shutil.which("majordomus-hook", path=SYSTEM_PATH) is None
    for script in sorted((initialised_repo / hooks_dir(name)).iterdir()):
        done = run_as_the_client(script, initialised_repo, session_bytes(name, "start", f"{name}-clone"), SYSTEM_PATH)
        assert done.returncode == 0, script
        assert done.stderr == b"", script
        assert json.loads(done.stdout) == {"cancel": False}, script
    assert open_files(initialised_repo) == {} and records(initialised_repo) == {}


@pytest.mark.parametrize("name", EXECUTABLE_HOOKS)
def test_uninstall_after_install_leaves_the_tree_byte_identical(initialised_repo: Path, name: str) -> None:
    mine = initialised_repo / hooks_dir(name) / "PreToolUse"  # a hook of the person's, beside ours
    mine.parent.mkdir(parents=True)
    mine.write_bytes(b"#!/bin/sh\necho '{}'\n")
    mine.chmod(0o700)
    before = tree(initialised_repo)
    assert majordomus(initialised_repo, "capture", "install", "--provider", name).returncode == 0
    assert majordomus(initialised_repo, "capture", "install", "--provider", name).stdout.count("nothing to change")
    done = majordomus(initialised_repo, "capture", "uninstall", "--provider", name)
    assert done.returncode == 0, done.stderr
    after = {k: v for k, v in tree(initialised_repo).items() if not k.startswith(".ai/")}
    assert after == {k: v for k, v in before.items() if not k.startswith(".ai/")}


@pytest.mark.parametrize("name", EXECUTABLE_HOOKS)
def test_uninstall_leaves_its_own_executables_a_person_edited(initialised_repo: Path, name: str) -> None:
    assert majordomus(initialised_repo, "capture", "install", "--provider", name).returncode == 0
    row = DECLARED[name].session
    assert row is not None
    edited = initialised_repo / hooks_dir(name) / row.events["start"][0]
    edited.write_bytes(edited.read_bytes() + b"echo mine >&2\n")
    done = majordomus(initialised_repo, "capture", "uninstall", "--provider", name)
    assert done.returncode == 0, done.stderr
    assert edited.read_bytes().endswith(b"echo mine >&2\n")
    assert sorted(p.name for p in edited.parent.iterdir()) == [edited.name]


@pytest.mark.parametrize("name", EXECUTABLE_HOOKS)
def test_a_persons_own_hook_of_the_same_name_is_refused_and_kept(initialised_repo: Path, name: str) -> None:
    row = DECLARED[name].session
    assert row is not None
    theirs = initialised_repo / hooks_dir(name) / row.events["start"][0]
    theirs.parent.mkdir(parents=True)
    theirs.write_bytes(b"#!/bin/sh\necho '{\"cancel\": false, \"contextModification\": \"mine\"}'\n")
    theirs.chmod(0o750)
    before = tree(initialised_repo)
    done = majordomus(initialised_repo, "capture", "install", "--provider", name)
    assert done.returncode == 15, done.stderr
    assert f"{hooks_dir(name)}/{theirs.name} is your own" in done.stderr
    assert len(done.stderr.strip().splitlines()) <= 2
    assert tree(initialised_repo) == before  # nothing written, theirs byte-identical


@pytest.mark.parametrize("name", EXECUTABLE_HOOKS)
def test_status_says_the_executables_are_wired_and_verified(initialised_repo: Path, name: str) -> None:
    before = json.loads(majordomus(initialised_repo, "capture", "status", "--json").stdout)
    assert majordomus(initialised_repo, "capture", "install", "--provider", name).returncode == 0
    after = json.loads(majordomus(initialised_repo, "capture", "status", "--json").stdout)

    def state(doc: dict[str, object], aspect: str) -> str:
        rows = doc["providers"]
        assert isinstance(rows, list)
        (row,) = [r for r in rows if r["provider"] == name and r["aspect"] == aspect]
        return str(row["state"])

    assert state(before, "session") == "unconfigured"
    assert state(after, "session") == "verified" and state(after, "prompt") == "verified"
