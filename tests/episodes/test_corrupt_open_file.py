"""An open-episode file edited by hand (or torn by a foreign tool) never blocks the close, and
nothing it says can make the close write outside the repository."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from conftest import MAJORDOMUS

OPEN = ".ai/local/state/sessions-open"
EDITS = {
    "compactions as a list": ("compactions", "[1, 2]"),
    "compactions as a mapping": ("compactions", "{a: 1}"),
    "compactions huge": ("compactions", "99999999999999999999999999"),
    "started_at as a list": ("started_at", "[1, 2]"),
    "started_at a path": ("started_at", '"/../../../../../../tmp/majordomus-escape"'),
    "session_id a path": ("session_id", '"../../../../../../tmp/majordomus-escape"'),
    "session_id in brackets": ("session_id", "[x]"),
    "last_turn as a mapping": ("last_turn", "{x: 1}"),
}


def hook(repo: Path, event: str, payload: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([str(MAJORDOMUS), "capture", "session", "--provider", "claude-code", "--event", event],
                          cwd=repo, input=json.dumps(payload).encode(), capture_output=True, timeout=60)


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_an_edited_open_file_still_closes_inside_the_repository(initialised_repo: Path, edit: str) -> None:
    """1. start; 2. one member of the open file replaced; 3. end. Result: exit 0, `episode closed` into one record
    under `.ai/repo/sessions/` whose name holds no `/`, `[` or `..`; the open file is gone; nothing appeared
    beside the repository or in /tmp."""
    assert hook(initialised_repo, "start", {"session_id": "edited", "source": "startup"}).returncode == 0
    path = initialised_repo / OPEN / "edited.yaml"
    key, value = EDITS[edit]
    text = path.read_text()
    path.write_text(re.sub(rf"^{key}: .*$", f"{key}: {value}", text, flags=re.MULTILINE))
    before = set(initialised_repo.parent.iterdir())
    done = hook(initialised_repo, "end", {"session_id": "edited", "reason": "other"})
    assert done.returncode == 0 and b"episode closed" in done.stderr, done.stderr
    records = [p for p in (initialised_repo / ".ai/repo/sessions").iterdir() if p.name != "README.md"]
    assert len(records) == 1 and not any(c in records[0].name for c in "[]/") and ".." not in records[0].name
    assert not path.exists()
    assert set(initialised_repo.parent.iterdir()) <= before and not list(Path("/tmp").glob("majordomus*escape*"))
