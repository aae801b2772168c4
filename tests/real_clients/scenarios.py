"""The sittings each client is put through, run once per test session and shared by the tests that read them.

- headless: a prompt holding a credential, the client's normal headless run, then a resumed second run;
- killed: the fake API stalls mid-answer and the client's process group gets SIGTERM;
- mcp: the model calls the client's own name for `majordomus_session_attach`;
- untrusted: the project wired but the client's trust not given (Codex hook review, Gemini folder trust);
- copilot race: Copilot with its SessionStart hook slowed by 1.5 s, as on a slow repository.

Each checks only what the client itself must have done (exited as it should, asked the model, made the tool
call); what majordomus recorded is for the tests.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from real_clients.drivers import DRIVERS
from real_clients.fake_api import ANSWER, Stall, Text, ToolCall
from real_clients.pinned import Installed
from real_clients.world import VENV_BIN, ClientFailed, Episode, Ran, World, model_texts
from support import broken_install

COPILOT_START_SECONDS = 1.5  # a slow disk or a big repository: the start's `git status` takes this much longer
T = TypeVar("T")


@dataclass(frozen=True)
class Sitting:
    prompt: str
    ran: Ran
    new_episodes: list[Episode]  # episodes (closed or open) that appeared during this run

    def hook_episodes(self, provider: str) -> list[Episode]:
        return [e for e in self.new_episodes if e.provider == provider]


def sit(world: World, prompt: str, argv: list[str], runner: Callable[[list[str]], Ran] | None = None) -> Sitting:
    before = {e.session_id for e in world.episodes()}
    ran = (runner or world.run)(argv)
    return Sitting(prompt, ran, [e for e in world.episodes() if e.session_id not in before])


def require_model_saw(sitting: Sitting, text: str) -> None:
    if not any(text in s for s in model_texts(sitting.ran.requests)):
        raise ClientFailed(f"the fake model API never received {text[:40]!r}: {sitting.ran.describe()}")


@dataclass(frozen=True)
class Headless:
    world: World
    first: Sitting
    second: Sitting

    def prompt_records(self) -> list[dict[str, object]]:
        """The two prompts' records, in the order of the sittings (two prompts of one second sort by their slug)."""
        found = self.world.prompts()
        opening = self.first.prompt.split(self.world.credential)[0]
        first = [p for p in found if str(p.get("text") or "").startswith(opening)]
        second = [p for p in found if p.get("text") == self.second.prompt]
        return first + second + [p for p in found if p not in first and p not in second]


def headless(world: World) -> Headless:
    driver = world.driver
    world.api.script = Text()
    world.api.distinct_usage = True  # each answer's usage its own figures, which the episode's must add up to
    prompt = f"Read README.md and sum it up in one line. The deploy token is {world.credential}, keep it out of it."
    first = sit(world, prompt, driver.headless(prompt))
    require_model_saw(first, world.credential)
    if ANSWER not in first.ran.stdout:
        raise ClientFailed(f"the answer never reached stdout: {first.ran.describe()}")
    again = "Now say the same in fewer words."
    second = sit(world, again, driver.resume(again, first.ran.stdout, first.ran.stderr))
    require_model_saw(second, again)
    return Headless(world, first, second)


@dataclass(frozen=True)
class Killed:
    world: World
    sitting: Sitting


def killed(world: World) -> Killed:
    world.api.script = Stall()
    prompt = "Explain README.md line by line, slowly."
    sitting = sit(world, prompt, world.driver.headless(prompt), runner=world.run_killed_mid_answer)
    return Killed(world, sitting)


@dataclass(frozen=True)
class Mcp:
    world: World
    sitting: Sitting
    external_id: str
    answer: str  # the attach tool's result, as the client handed it back to the model


def mcp(world: World) -> Mcp:
    driver = world.driver
    external_id = f"{driver.provider}-sitting-{secrets.token_hex(4)}"
    calls = driver.attach_calls(external_id)
    world.api.script = ToolCall(calls)
    prompt = "Record this sitting in the repository, as the majordomus server asks."
    sitting = sit(world, prompt, driver.with_mcp(prompt))
    wanted = [call.wanted for call in calls]
    if world.api.tool_calls_sent != wanted:
        raise ClientFailed(f"the model could not call {wanted}: sent {world.api.tool_calls_sent}, the client "
                           f"offered {sorted(world.api.offered())}; {sitting.ran.describe()}")
    answers = [s for s in model_texts(sitting.ran.requests) if external_id in s and "repository" in s]
    if not answers:
        raise ClientFailed(f"no attach result came back to the model for {external_id}: {sitting.ran.describe()}")
    return Mcp(world, sitting, external_id, answers[0])


@dataclass(frozen=True)
class Untrusted:
    world: World
    status: list[dict[str, object]]  # capture status before the run
    sitting: Sitting


def untrusted(world: World) -> Untrusted:
    """The project wired, the client's own trust not given: read status, then run the client once."""
    if world.driver.provider == "gemini":
        (world.home / ".gemini" / "trustedFolders.json").unlink()
    status = world.status_rows()
    world.api.script = Text()
    prompt = "Sum up README.md in one line."
    return Untrusted(world, status, sit(world, prompt, world.driver.headless(prompt),
                                        runner=lambda argv: world.run(argv, check=False)))


@dataclass(frozen=True)
class Race:
    world: World
    sitting: Sitting
    reconciled: str


def copilot_race(world: World) -> Race:
    """Copilot starts SessionStart and UserPromptSubmit at once; a start whose `git status` is slowed by 1.5 s (a
    slow disk, a big repository) lets the prompt hook run first. The wiring is restored before anything is read."""
    hook_file = world.repo / world.driver.hook_file
    original = hook_file.read_bytes()
    doc = json.loads(original)
    slow = world.tmp / "slow-git"
    slow.mkdir(exist_ok=True)
    real = shutil.which("git", path=world.env()["PATH"]) or "/usr/bin/git"
    (slow / "git").write_text(f'#!/bin/sh\nfor a in "$@"; do [ "$a" = status ] && sleep {COPILOT_START_SECONDS} '
                              f'&& break; done\nexec {real} "$@"\n')
    (slow / "git").chmod(0o755)
    for handler in doc["hooks"]["SessionStart"]:
        if "majordomus" in handler["bash"]:
            handler["bash"] = f'PATH="{slow}:$PATH" ' + handler["bash"]
    hook_file.write_text(json.dumps(doc, indent=2))
    world.pace = False  # this sitting is the race
    world.api.script = Text()
    prompt = "Sum up README.md in one line."
    try:
        sitting = sit(world, prompt, world.driver.headless(prompt))
    finally:
        hook_file.write_bytes(original)
    reconciled = world.check_majordomus("capture", "reconcile").stdout
    return Race(world, sitting, reconciled)


@dataclass(frozen=True)
class FailOpen:
    world: World
    sitting: Sitting
    failures: list[str]  # the lines `.ai/local/hook-failures.log` holds after the sitting
    doctor: list[dict[str, object]]


def _fail_open(world: World, break_it: Callable[[World], None]) -> FailOpen:
    """One headless sitting of a wired client whose majordomus is missing or broken (`break_it`); the client must
    answer as if it were not wired at all."""
    break_it(world)
    world.pace = False  # nothing of ours runs: there is no order of our hooks to keep
    world.api.script = Text()
    prompt = "Sum up README.md in one line."
    sitting = sit(world, prompt, world.driver.headless(prompt))
    require_model_saw(sitting, prompt)
    if ANSWER not in sitting.ran.stdout:
        raise ClientFailed(f"the client did not answer the prompt: {sitting.ran.describe()}")
    log = world.repo / ".ai/local/hook-failures.log"
    failures = log.read_text().splitlines() if log.exists() else []
    world.without_majordomus, world.extra_env = False, {}
    return FailOpen(world, sitting, failures, world.doctor())


def _a_clone_without_majordomus(world: World) -> None:
    """A teammate's clone: majordomus not on PATH, and no per-person file (git never carried it)."""
    world.without_majordomus = True
    local = world.driver.local_hook_file
    if local:
        (world.repo / local).unlink()


def _an_interpreter_that_will_not_start(world: World) -> None:
    """A virtualenv removed under its executables: the launcher and the MCP server name a python that is gone."""
    broken = world.tmp / "broken-venv" / "bin"
    broken.mkdir(parents=True, exist_ok=True)
    for name in ("majordomus", "majordomus-hook", "majordomus-mcp"):
        (broken / name).write_text(f"#!{broken / 'python'}\n")
        (broken / name).chmod(0o755)
    world.without_majordomus = True
    world.extra_env = {"PATH": os.pathsep.join([str(broken), world.env()["PATH"]])}
    _point_local_file_at(world, broken)


def _point_local_file_at(world: World, bin_dir: Path) -> None:
    """The per-person file as install would have written it from the install in `bin_dir`: its launcher, and the
    interpreter the command starts it with."""
    local = world.driver.local_hook_file
    if local:
        path = world.repo / local
        text = path.read_text().replace(str(VENV_BIN / "majordomus-hook"), str(bin_dir / "majordomus-hook"))
        path.write_text(text.replace(f"{VENV_BIN / 'python'} -IS ", f"{bin_dir / 'python'} -IS ")
                        .replace(f"[ -x {VENV_BIN / 'python'} ]", f"[ -x {bin_dir / 'python'} ]"))


def _a_package_that_will_not_import(world: World) -> None:
    """A half-finished upgrade: the launcher starts, and `import majordomus` fails (an install of its own, first on
    PATH, whose site-packages holds a majordomus that raises)."""
    broken = broken_install(world.tmp, {"majordomus/__init__.py": "raise ImportError('a half-finished upgrade')\n"})
    world.without_majordomus = True
    world.extra_env = {"PATH": os.pathsep.join([str(broken), world.env()["PATH"]])}
    _point_local_file_at(world, broken)


def absent(world: World) -> FailOpen:
    return _fail_open(world, _a_clone_without_majordomus)


def broken_interpreter(world: World) -> FailOpen:
    return _fail_open(world, _an_interpreter_that_will_not_start)


def broken_package(world: World) -> FailOpen:
    return _fail_open(world, _a_package_that_will_not_import)


SCENARIOS: dict[str, Callable[[World], object]] = {
    "absent": absent, "broken-interpreter": broken_interpreter, "broken-package": broken_package,
    "headless": headless, "killed": killed, "mcp": mcp, "untrusted": untrusted, "copilot-race": copilot_race,
}


class Scenarios:
    """Runs each (client, scenario) once, in its own world, the first time a test asks; remembers a failure."""

    def __init__(self, base: Path, installed: Installed) -> None:
        self.base = base
        self.installed = installed
        self.done: dict[tuple[str, str], object] = {}
        self.failed: dict[tuple[str, str], BaseException] = {}
        self.worlds: list[World] = []

    def get(self, client: str, name: str, copy: int = 0) -> object:
        """`copy` > 0: the same scenario again, in a world of its own (for what a single run shows by chance)."""
        key = (client, name if not copy else f"{name}-{copy}")
        if key in self.failed:
            raise self.failed[key]
        if key not in self.done:
            try:
                world = World(self.base / f"{client}-{key[1]}", DRIVERS[client], self.installed,
                              reviewed=name != "untrusted")
                self.worlds.append(world)
                self.done[key] = SCENARIOS[name](world)
            except Exception as exc:  # noqa: BLE001 - remembered and raised again for every test that asks
                failure = exc if isinstance(exc, ClientFailed) else ClientFailed(f"{client} {name}: {exc!r}")
                self.failed[key] = failure
                raise failure from exc
        return self.done[key]

    def close(self) -> None:
        for world in self.worlds:
            world.close()

    def headless(self, client: str) -> Headless:
        return self.typed(client, "headless", Headless)

    def killed(self, client: str) -> Killed:
        return self.typed(client, "killed", Killed)

    def mcp(self, client: str, copy: int = 0) -> Mcp:
        return self.typed(client, "mcp", Mcp, copy)

    def untrusted(self, client: str) -> Untrusted:
        return self.typed(client, "untrusted", Untrusted)

    def fail_open(self, client: str, how: str) -> FailOpen:
        return self.typed(client, how, FailOpen)

    def copilot_race(self) -> Race:
        return self.typed("copilot", "copilot-race", Race)

    def typed(self, client: str, name: str, kind: type[T], copy: int = 0) -> T:
        found = self.get(client, name, copy)
        if not isinstance(found, kind):
            raise ClientFailed(f"{client} {name} gave a {type(found).__name__}, not a {kind.__name__}")
        return found
