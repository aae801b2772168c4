"""A real client in a terminal, as a person runs it: a detached tmux session of a fixed size on a private server.

`tmux -L <name>` gives every terminal its own tmux server, so a test never touches a person's tmux. The
client runs in the World's environment with the repository as its working directory; the test types into it
(`type`, `enter`, `keys`), reads what it shows (`screen`, `wait_for_screen`) and ends it as a person would:
by the client's own command, by keys, or by closing the window (`close_window`: the session killed, so the
client gets SIGHUP from its closing terminal). Nothing here sleeps to win a race: every wait is for a screen
or a process.
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from real_clients.world import ClientFailed, World, group_members, wait_until

WIDTH, HEIGHT = 160, 50


# the pane stays after the client exits, so its last screen can still be read; nothing of a person's tmux.conf
CONFIG = ("set -g remain-on-exit on\nset -g history-limit 5000\nset -g default-terminal xterm-256color\n"
          "set -g focus-events on\n")


class Terminal:
    def __init__(self, world: World, argv: list[str], name: str) -> None:
        self.world = world
        self.socket = f"majordomus-test-{name}-{secrets.token_hex(4)}"
        self.argv = world.executable(argv)
        config = world.root / f"tmux-{name}.conf"
        config.write_text(CONFIG)
        env = {**world.env(), "TERM": "xterm-256color"}
        env.pop("NO_COLOR", None)  # the clients draw their screens as a person sees them
        self.env = env
        world.runs += 1
        self.transcript = world.logs / f"run{world.runs}-{name}.screen"
        self.tmux("-f", str(config), "new-session", "-d", "-s", "client", "-x", str(WIDTH), "-y", str(HEIGHT),
                  "-c", str(world.repo), "--", *self.argv)
        self.pid = int(self.tmux("display-message", "-p", "-t", "client", "#{pane_pid}").strip())
        self.closed = False

    def tmux(self, *args: str, check: bool = True) -> str:
        done = subprocess.run(["tmux", "-L", self.socket, *args], env=self.env, capture_output=True, text=True,
                              timeout=30, check=False)
        if check and done.returncode != 0:
            raise ClientFailed(f"tmux {' '.join(args[:3])} … exited {done.returncode}: {done.stderr.strip()}")
        return done.stdout

    # ---- typing ------------------------------------------------------------------------------------------

    def type(self, text: str) -> None:
        """Type text, literally (no Enter): the clients take text and Enter in one burst as a paste."""
        self.tmux("send-keys", "-t", "client", "-l", "--", text)

    def keys(self, *names: str) -> None:
        """tmux key names: `Enter`, `C-d`, `C-c`, `Escape`."""
        self.tmux("send-keys", "-t", "client", *names)

    def enter(self) -> None:
        self.keys("Enter")

    def submit(self, text: str, echo: str | None = None, seconds: float = 30) -> None:
        """Type a line, wait until the client shows it (or `echo`), then press Enter on its own. Keys a client
        dropped while it redrew (Gemini CLI just after `/clear`) show nothing at all: typed again, once."""
        shown = re.escape(echo if echo is not None else text[:30])
        self.type(text)
        try:
            self.wait_for_screen(shown, min(10, seconds))
        except ClientFailed:
            if text[:5] in self.screen():
                raise  # typed and shown otherwise than expected: typing it again would double it
            self.type(text)
            self.wait_for_screen(shown, seconds)
        self.enter()

    def run_command(self, text: str, done: Callable[[], bool], seconds: float, what: str) -> None:
        """Submit a slash command until it took: Gemini CLI and Codex now and then take the Enter as the choice of
        the command in their list and leave it typed, where a person presses Enter again."""
        self.submit(text)
        deadline = time.monotonic() + seconds
        while True:
            left = deadline - time.monotonic()
            try:
                wait_until(done, max(0.1, min(6, left)), what)
                return
            except ClientFailed:
                if left <= 6:
                    raise ClientFailed(f"{what} did not happen within {seconds:.0f} s of {text}; the screen:\n"
                                       f"{self.screen()}") from None
                if self.running() and text in self.screen():
                    self.enter()

    def press_until(self, key: str, pattern: str, seconds: float = 30) -> None:
        """Press `key` until the screen shows `pattern`: a client that is still starting drops the first keys."""
        wanted = re.compile(pattern)
        deadline = time.monotonic() + seconds
        while not wanted.search(self.screen()):
            if time.monotonic() > deadline or not self.running():
                raise ClientFailed(f"pressing {key} never showed {pattern!r}; the screen:\n{self.screen()}")
            self.keys(key)
            try:
                self.wait_for_screen(pattern, 1.5)
            except ClientFailed:
                continue

    # ---- reading -----------------------------------------------------------------------------------------

    def screen(self) -> str:
        if self.closed:
            return ""
        return self.tmux("capture-pane", "-p", "-t", "client", "-J", check=False)

    def running(self) -> bool:
        return self.pid_alive() and self.tmux("display-message", "-p", "-t", "client", "#{pane_dead}",
                                              check=False).strip() != "1"

    def pid_alive(self) -> bool:
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        try:
            stat = Path(f"/proc/{self.pid}/stat").read_text()
            return stat[stat.rindex(")") + 2] != "Z"
        except (OSError, ValueError):
            return False

    def wait_for_screen(self, pattern: str, seconds: float = 60) -> re.Match[str]:
        """Wait until the screen shows `pattern` (a regex); the last screen is in the error when it does not."""
        wanted = re.compile(pattern)
        deadline = time.monotonic() + seconds
        last = ""
        while time.monotonic() < deadline:
            last = self.screen()
            found = wanted.search(last)
            if found:
                return found
            if not self.running():
                last = self.screen()
                found = wanted.search(last)
                if found:
                    return found
                status = self.tmux("display-message", "-p", "-t", "client", "#{pane_dead_status}",
                                   check=False).strip() or "unknown"
                raise ClientFailed(f"{self.argv[0]} exited (status {status}) before showing {pattern!r}; "
                                   f"its screen:\n{last}")
            time.sleep(0.1)
        raise ClientFailed(f"{Path(self.argv[0]).name} did not show {pattern!r} within {seconds:.0f} s; "
                           f"its screen:\n{last}")

    def wait_for_screen_or_exit(self, pattern: str, seconds: float) -> bool | None:
        """True once the screen shows `pattern`; False when the client exits first; None when neither came."""
        wanted = re.compile(pattern)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if not self.running():
                return False
            if wanted.search(self.screen()):
                return True
            time.sleep(0.05)
        return None

    def wait_exited(self, seconds: float = 60) -> None:
        """Wait for the client, then for what it started (hooks, the MCP server) to end."""
        wait_until(lambda: not self.running(), seconds, f"{Path(self.argv[0]).name}'s exit")
        self.save_screen()
        self.world.settle(self.pid)

    # ---- ending ------------------------------------------------------------------------------------------

    def close_window(self, seconds: float = 60) -> None:
        """The terminal closed: tmux kills the session, the client gets SIGHUP; wait for it and its children."""
        self.save_screen()
        self.tmux("kill-session", "-t", "client", check=False)
        self.closed = True
        wait_until(lambda: not self.pid_alive(), seconds, f"{Path(self.argv[0]).name}'s exit on SIGHUP")
        self.world.settle(self.pid)

    def save_screen(self) -> None:
        if not self.closed:
            self.transcript.write_text(self.screen())

    def stop(self) -> None:
        """SIGSTOP the client's main process (a person's Ctrl-Z, a debugger)."""
        os.kill(self.pid, signal.SIGSTOP)

    def resume_process(self) -> None:
        os.kill(self.pid, signal.SIGCONT)

    def cleanup(self) -> None:
        if not self.closed:
            self.save_screen()
            self.tmux("kill-server", check=False)
            self.closed = True
        if group_members(self.pid):
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
