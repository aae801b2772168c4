"""SPEC §5.4: a prompt captured `orphan` in the very second its session's episode closed stays
`orphan` through reconcile: the window that only touches its second does not contradict what capture saw.

1. A real Claude Code episode opens and closes (the real hooks); 2. in the same second a prompt of that session
arrives (no episode open: capture says `orphan`); 3. `capture reconcile`. Result: the prompt is still `orphan`.
The seconds are real, so the sequence is retried (a fresh session each time) until the close and the prompt
share one.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from support import MAJORDOMUS, hook, records


def prompt(repo: Path, session: str) -> None:
    done = subprocess.run([str(MAJORDOMUS), "capture", "prompt", "--provider", "claude-code"], cwd=repo,
                          input=json.dumps({"session_id": session, "prompt": "one more thing"}).encode(),
                          capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr


def prompt_records(repo: Path) -> list[dict[str, object]]:
    return [json.loads(p.read_text()) for p in sorted((repo / ".ai/local/prompts").glob("*.json"))]


def test_an_orphan_in_the_second_its_episode_closed_stays_orphan(initialised_repo: Path) -> None:
    for attempt in range(12):
        session = f"cc-second-{attempt}"
        before = set(records(initialised_repo))
        assert hook(initialised_repo, "start", {"session_id": session}).returncode == 0
        assert hook(initialised_repo, "end", {"session_id": session, "reason": "logout"}).returncode == 0
        prompt(initialised_repo, session)
        closed = [r for name, r in records(initialised_repo).items() if name not in before]
        mine = [r for r in prompt_records(initialised_repo) if r["session"] == session]
        assert len(mine) == 1 and mine[0]["episode_link"] == "orphan", mine
        if any(str(r["closed_at"]) == mine[0]["started_at"] for r in closed):
            break
    else:
        raise AssertionError("no close and prompt shared a second in 12 tries")
    done = subprocess.run([str(MAJORDOMUS), "capture", "reconcile"], cwd=initialised_repo, capture_output=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    after = [r for r in prompt_records(initialised_repo) if r["session"] == session]
    assert (after[0]["episode"], after[0]["episode_link"]) == (None, "orphan")
