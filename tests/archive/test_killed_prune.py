"""A `prune` killed at any moment never leaves a taken body in a rendering, and doctor sees
a rendering that disagrees with its record (which `capture render` repairs).

Prune rewrote the record, then the renderings: a kill between the two (33 of 53 trials) left the full body in
the `.md` and `.yaml` of a record that said it was pruned, and every later prune, render and doctor said OK.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import MAJORDOMUS
from mcp_support import set_policy

PROMPTS = ".ai/local/prompts"
COUNT = 40


def capture(repo: Path, text: str) -> None:
    done = subprocess.run([str(MAJORDOMUS), "capture", "prompt", "--provider", "claude-code"], cwd=repo,
                          input=json.dumps({"session_id": "ps", "prompt": text}).encode(), capture_output=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr


def leaks(repo: Path) -> list[str]:
    """Renderings that still carry a body their record no longer has."""
    archive = repo / PROMPTS
    found = []
    for path in archive.glob("*.json"):
        record = json.loads(path.read_text())
        if record["text"] is not None:
            continue
        for suffix in (".md", ".yaml"):
            rendering = path.with_suffix(suffix)
            if rendering.exists() and "BODY-" in rendering.read_text():
                found.append(rendering.name)
    return found


@pytest.mark.slow
def test_prunes_killed_at_random_moments_never_leave_a_body_in_a_rendering(initialised_repo: Path,
                                                                           run_majordomus) -> None:
    """1. 40 prompts; the policy caps bodies at 1 byte, so prune takes every one; 2. 30 trials: a prune
    SIGKILLed after a random 0–150 ms. Result: after every trial no pruned record has a body in a rendering;
    at the end doctor agrees, or names the disagreeing renderings and `capture render` repairs them."""
    for i in range(COUNT):
        capture(initialised_repo, f"BODY-{i} please refactor the module")
    set_policy(initialised_repo, prompts__retention_max_bytes=1)
    rng = random.Random(7)
    for trial in range(30):
        proc = subprocess.Popen([str(MAJORDOMUS), "capture", "prune"], cwd=initialised_repo,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0, 0.15))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert leaks(initialised_repo) == [], trial
    done = run_majordomus("capture", "prune", cwd=initialised_repo)
    assert done.returncode == 0, done.stderr
    assert leaks(initialised_repo) == []
    assert not [p for p in (initialised_repo / PROMPTS).iterdir() if "BODY-" in p.read_text(errors="replace")]


def test_doctor_finds_a_rendering_that_disagrees_with_its_record_and_render_repairs_it(initialised_repo: Path,
                                                                                       run_majordomus) -> None:
    capture(initialised_repo, "BODY-x a prompt")
    (md,) = (initialised_repo / PROMPTS).glob("*.md")
    md.write_text(md.read_text().replace("a prompt", "something else"))
    doctor = run_majordomus("doctor", cwd=initialised_repo)
    assert doctor.returncode == 10 and b"says something else than the record" in doctor.stdout
    assert md.stem.encode() in doctor.stdout  # the record named, so a person knows which to look at
    assert run_majordomus("capture", "render", cwd=initialised_repo).returncode == 0
    assert "a prompt" in md.read_text()
    assert run_majordomus("doctor", cwd=initialised_repo).returncode == 0
