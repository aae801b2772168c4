"""Real clients end to end: the pinned npm clients, each in its own world, against the fake model API.

They skip, all of them with one sentence, only when the npm registry cannot be reached and nothing is cached;
any other trouble installing or running a client is an error.
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterator

import pytest

from real_clients.pinned import CACHE, Installed, RegistryUnreachable, ensure_installed
from real_clients.scenarios import Scenarios

INSTALL_SECONDS = 1200  # a first install downloads about 400 MB; a cached one takes seconds


def group_of(item: pytest.Item) -> str:
    """Which pytest-xdist worker group a test runs in (`make test-clients` runs two workers, `--dist
    loadgroup`): a client's tests together, so that each client's scenarios are run once, by one worker; a module
    whose fixture starts the sittings of all its tests (the interactive matrix, Cline's, Qwen Code's) whole."""
    module = item.nodeid.split("::")[0].rsplit("/", 1)[-1]
    params = getattr(getattr(item, "callspec", None), "params", {})
    if module == "test_interactive_endings.py" or "client" not in params:
        return module
    return str(params["client"])


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "real_clients" not in item.nodeid:
            continue
        if item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(INSTALL_SECONDS))
        item.add_marker(pytest.mark.xdist_group(group_of(item)))


@pytest.fixture(scope="session")
def installed() -> Installed:
    """The pinned clients, installed once: a second worker waits for the first one's install (a file lock
    beside the cache), then finds it."""
    CACHE.parent.mkdir(parents=True, exist_ok=True)
    with open(CACHE.parent / "clients.install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            return ensure_installed()
        except RegistryUnreachable as exc:
            pytest.skip(f"Real-client tests skipped: {exc}, so the pinned clients cannot be installed.")


@pytest.fixture(scope="session")
def scenarios(installed: Installed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenarios]:
    found = Scenarios(tmp_path_factory.mktemp("real-clients"), installed)
    yield found
    found.close()
