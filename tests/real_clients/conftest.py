"""Real clients end to end: the pinned npm clients, each in its own world, against the fake model API.

They skip, all of them with one sentence, only when the npm registry cannot be reached and nothing is cached;
any other trouble installing or running a client is an error.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from real_clients.pinned import Installed, RegistryUnreachable, ensure_installed
from real_clients.scenarios import Scenarios

INSTALL_SECONDS = 1200  # a first install downloads about 400 MB; a cached one takes seconds


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "real_clients" in item.nodeid and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(INSTALL_SECONDS))


@pytest.fixture(scope="session")
def installed() -> Installed:
    try:
        return ensure_installed()
    except RegistryUnreachable as exc:
        pytest.skip(f"Real-client tests skipped: {exc}, so the pinned clients cannot be installed.")


@pytest.fixture(scope="session")
def scenarios(installed: Installed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenarios]:
    found = Scenarios(tmp_path_factory.mktemp("real-clients"), installed)
    yield found
    found.close()
