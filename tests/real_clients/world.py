"""One real client's world: a temp repository wired by `majordomus capture install`, an isolated HOME, the
fake model API, and the runs of the client in it, with what they left under `.ai/`.

A run that cannot happen as a person would see it (the client crashes, hangs, never asks the model) raises
`ClientFailed`, which is not an AssertionError: a test marked xfail for a known product bug still fails
when the client itself did not do its part.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import string
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from real_clients.drivers import Driver
from real_clients.fake_api import FakeApi, Request, strings
from real_clients.pinned import Installed

VENV_BIN = Path(sys.executable).parent
MAJORDOMUS = VENV_BIN / "majordomus"
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


class ClientFailed(Exception):
    """The real client did not do what a person running it would see it do."""


def fake_credential() -> str:
    """A GitHub token shape (`ghp_` and 36 letters or digits), fresh per world."""
    alphabet = string.ascii_letters + string.digits
    return "ghp_" + "".join(secrets.choice(alphabet) for _ in range(36))


def wait_until(condition: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise ClientFailed(f"{what} did not happen within {seconds:.0f} s")


def group_members(pgid: int) -> list[str]:
    """The command lines of the live processes in a process group (Linux /proc)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            fields = stat[stat.rindex(")") + 2:].split()
            if fields[0] != "Z" and int(fields[2]) == pgid:
                members.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
        except (OSError, ValueError, IndexError):
            continue
    return members


@dataclass
class Ran:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    requests: list[Request]  # what the fake API got during this run
    left_behind: list[str] = field(default_factory=list)  # processes of the client's group still alive after it

    def describe(self) -> str:
        return (f"{' '.join(self.argv[:3])} … exited {self.returncode} after {self.seconds:.1f} s; "
                f"stdout: {self.stdout[-600:]!r}; stderr: {self.stderr[-900:]!r}")


@dataclass(frozen=True)
class Episode:
    session_id: str
    provider: str
    provider_session: str | None
    closed: bool
    data: dict[str, Any]


class World:
    def __init__(self, root: Path, driver: Driver, installed: Installed, reviewed: bool = True) -> None:
        self.root = root
        self.driver = driver
        self.installed = installed
        self.repo = root / "repo"
        self.home = root / "home"
        self.tmp = root / "tmp"
        self.logs = root / "logs"
        for folder in (self.repo, self.home, self.tmp, self.logs):
            folder.mkdir(parents=True, exist_ok=True)
        self.credential = fake_credential()
        self.wiring: bytes | None = None  # the hook file as install wrote it, while a run has it paced
        self.pace = True  # the driver may order the client's hooks for a run (Copilot); see Driver.paced
        self.without_majordomus = False  # a teammate's machine: majordomus is not on the PATH the client starts with
        self.extra_env: dict[str, str] = {}  # what a run adds to the client's environment (a broken install's PATH)
        self.api = FakeApi().start()
        self.runs = 0
        self.make_repository()
        driver.prepare_home(self.home, self.repo, self.api.url)
        if reviewed:
            driver.review(self.executable([driver.command])[0], self.repo, self.env())

    # ---- set-up ------------------------------------------------------------------------------------------

    def env(self) -> dict[str, str]:
        """A clean environment: nothing of the developer's own HOME, keys or client settings leaks in."""
        home = str(self.home)
        return {
            # the venv's bin first, so the hooks and the MCP entry find this worktree's majordomus
            "PATH": os.pathsep.join([*([] if self.without_majordomus else [str(VENV_BIN)]),
                                     self.installed.path_entry(), SYSTEM_PATH]),
            "HOME": home, "XDG_CONFIG_HOME": f"{home}/.config", "XDG_CACHE_HOME": f"{home}/.cache",
            "XDG_DATA_HOME": f"{home}/.local/share", "XDG_STATE_HOME": f"{home}/.local/state",
            "TMPDIR": str(self.tmp), "LANG": "C.UTF-8", "TERM": "dumb", "NO_COLOR": "1",
            "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "Test Person", "GIT_AUTHOR_EMAIL": "test@example.invalid",
            "GIT_COMMITTER_NAME": "Test Person", "GIT_COMMITTER_EMAIL": "test@example.invalid",
            **self.driver.env(self.home, self.api.url),
            **self.extra_env,
        }

    def git(self, *args: str) -> str:
        done = subprocess.run(["git", "-C", str(self.repo), *args], capture_output=True, text=True,
                              env=self.env(), check=True, timeout=60)
        return done.stdout.strip()

    def make_repository(self) -> None:
        self.git("init", "-q", "-b", "main")
        (self.repo / "README.md").write_text("A small repository that a coding agent works in.\n")
        self.git("add", "README.md")
        self.git("commit", "-q", "-m", "first commit")
        self.check_majordomus("init")
        self.check_majordomus("capture", "install", "--provider", self.driver.provider)
        self.git("add", "-A")
        self.git("commit", "-q", "-m", "majordomus layer and wiring")

    def majordomus(self, *args: str, input: bytes = b"") -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(MAJORDOMUS), *args], cwd=self.repo, env=self.env(), input=input.decode(),
                              capture_output=True, text=True, timeout=120, check=False)

    def check_majordomus(self, *args: str) -> subprocess.CompletedProcess[str]:
        done = self.majordomus(*args)
        if done.returncode != 0:
            raise ClientFailed(f"majordomus {' '.join(args)} exited {done.returncode}: {done.stderr}")
        return done

    def paced_wiring(self) -> bytes | None:
        """Put the driver's order on the client's hooks for one run (see Driver.paced); the original bytes."""
        if not self.driver.paces:
            return None
        hook_file = self.repo / self.driver.hook_file
        original = hook_file.read_bytes()
        paced = self.driver.paced(original)
        hook_file.write_bytes(paced)
        return original

    def restore_wiring(self) -> None:
        if self.wiring is not None:
            (self.repo / self.driver.hook_file).write_bytes(self.wiring)  # the wiring install wrote, as it was
            self.wiring = None

    def executable(self, argv: list[str]) -> list[str]:
        return [str(self.installed.bin / argv[0]), *argv[1:]]

    # ---- runs --------------------------------------------------------------------------------------------

    def start(self, argv: list[str]) -> tuple[subprocess.Popen[bytes], Path, Path, int]:
        self.runs += 1
        self.wiring = self.paced_wiring() if self.pace else None
        out = self.logs / f"run{self.runs}.stdout"
        err = self.logs / f"run{self.runs}.stderr"
        with out.open("wb") as stdout, err.open("wb") as stderr:
            # its own session: the test can signal the client's whole process group, as a closed terminal does
            process = subprocess.Popen(self.executable(argv), cwd=self.repo, env=self.env(),
                                       stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr,
                                       start_new_session=True)
        return process, out, err, len(self.api.requests)

    def finish(self, argv: list[str], process: subprocess.Popen[bytes], out: Path, err: Path, first: int,
               started: float, timeout: float) -> Ran:
        try:
            return self.wait_for(argv, process, out, err, first, started, timeout)
        finally:
            self.restore_wiring()

    def wait_for(self, argv: list[str], process: subprocess.Popen[bytes], out: Path, err: Path, first: int,
                 started: float, timeout: float) -> Ran:
        try:
            returncode = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
            raise ClientFailed(f"{argv[0]} did not finish within {timeout:.0f} s: {err.read_text()[-900:]!r}") from exc
        seconds = time.monotonic() - started
        left = self.settle(process.pid)
        return Ran(argv, returncode, out.read_text(errors="replace"), err.read_text(errors="replace"), seconds,
                   self.api.requests[first:], left)

    def settle(self, pgid: int, seconds: float = 20) -> list[str]:
        """Wait for what the client started (hooks, the MCP server) to end; kill what outlives the deadline."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if not group_members(pgid):
                return []
            time.sleep(0.05)
        left = group_members(pgid)
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        return left

    def run(self, argv: list[str], timeout: float = 240, check: bool = True) -> Ran:
        started = time.monotonic()
        process, out, err, first = self.start(argv)
        ran = self.finish(argv, process, out, err, first, started, timeout)
        if check and ran.returncode != 0:
            raise ClientFailed(ran.describe())
        return ran

    def run_killed_mid_answer(self, argv: list[str], timeout: float = 120) -> Ran:
        """Start the client on a stalling fake API, wait until the answer has begun and the prompt is archived,
        then SIGTERM the client's process group."""
        started = time.monotonic()
        process, out, err, first = self.start(argv)

        def stalled() -> bool:
            if process.poll() is not None:
                raise ClientFailed(f"{argv[0]} exited {process.returncode} before the answer began: "
                                   f"{err.read_text()[-900:]!r}")
            return self.api.stalled.is_set()

        try:
            wait_until(stalled, timeout, f"{argv[0]}'s model request")
            wait_until(lambda: bool(self.prompts()), 30, "the prompt's record")
        except ClientFailed:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
            self.restore_wiring()
            raise
        if process.poll() is not None:
            raise ClientFailed(f"{argv[0]} exited by itself mid-answer ({process.returncode})")
        os.killpg(process.pid, signal.SIGTERM)
        return self.finish(argv, process, out, err, first, started, timeout=60)

    # ---- what the runs left ------------------------------------------------------------------------------

    def records(self) -> list[dict[str, Any]]:
        found = []
        for path in sorted((self.repo / ".ai/repo/sessions").glob("2*.md")):
            text = path.read_text()
            found.append({**yaml.safe_load(text[4:text.index("\n---", 4)]), "_file": path.name})
        return found

    def open_files(self) -> list[dict[str, Any]]:
        folder = self.repo / ".ai/local/state/sessions-open"
        return [{**yaml.safe_load(p.read_text()), "_file": p.name} for p in sorted(folder.glob("*.yaml"))]

    def episodes(self) -> list[Episode]:
        closed = [Episode(r["session_id"], r["provider"], None, True, r) for r in self.records()]
        opened = [Episode(o["session_id"], o["provider"], o.get("provider_session"), False, o)
                  for o in self.open_files()]
        return closed + opened

    def prompts(self) -> list[dict[str, Any]]:
        folder = self.repo / ".ai/local/prompts"
        return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]

    def status_rows(self) -> list[dict[str, Any]]:
        done = self.check_majordomus("--json", "capture", "status")
        return list(json.loads(done.stdout)["providers"])

    def doctor(self) -> list[dict[str, Any]]:
        done = self.majordomus("--json", "doctor")
        if done.returncode not in (0, 10):
            raise ClientFailed(f"majordomus doctor exited {done.returncode}: {done.stderr}")
        return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]

    def places_holding(self, needle: str) -> list[str]:
        """Every file under .ai/ whose bytes hold `needle`, and every path in the repository that names it."""
        raw = needle.encode()
        found = []
        for path in sorted(self.repo.rglob("*")):
            relative = path.relative_to(self.repo).as_posix()
            if needle in relative:
                found.append(f"name: {relative}")
            elif relative.startswith(".ai/") and path.is_file() and not path.is_symlink() and raw in path.read_bytes():
                found.append(f"content: {relative}")
        return found

    def age_open_episodes(self, hours: float) -> None:
        """Move the last activity of every open episode back by `hours`: the day that passes before
        `capture recover` may call a hook episode whose end never came stale (SPEC §4.4)."""
        for path in (self.repo / ".ai/local/state/sessions-open").glob("*.yaml"):
            lines = []
            for line in path.read_text().splitlines(keepends=True):
                if line.startswith("last_activity_at:"):
                    then = datetime.now(UTC) - timedelta(hours=hours)
                    line = f'last_activity_at: "{then.strftime("%Y-%m-%dT%H:%M:%SZ")}"\n'
                lines.append(line)
            path.write_text("".join(lines))

    def kill_what_lives(self) -> None:
        """SIGKILL whatever of this world still lives (a daemon a client left: Codex's app-server, Cline's hub)."""
        for pid in processes_under(self.root):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def close(self) -> None:
        self.kill_what_lives()
        self.api.stop()


def model_texts(requests: list[Request]) -> list[str]:
    return [s for r in requests if r.api in ("anthropic", "responses", "chat", "gemini", "gemini-stream")
            for s in strings(r.body)]


def processes_under(root: Path) -> list[int]:
    """The live processes whose executable or arguments name a path inside a world's folder (its HOME, its
    repository). Inside, not beside: the worlds of `window-closed` and `window-closed-mid-answer` run at once,
    and the first one's folder name is the start of the second's."""
    inside = re.compile(re.escape(str(root).encode()) + rb"(/|\0|$)")
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if inside.search((entry / "cmdline").read_bytes()):
                found.append(int(entry.name))
        except OSError:
            continue
    return found
