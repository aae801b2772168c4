"""The page `majordomus export --format html` writes, in a real browser: headless /usr/bin/chromium driven by
playwright-core (pinned, from npm, cached under the virtualenv). The history is drawn by real hook runs of the
installed `majordomus` in a tmp git repository. Slow (`make test-slow`); it skips only when the npm registry cannot
be reached or chromium is missing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import RunMajordomus, git
from history.browser_pinned import CHROMIUM, ensure_installed
from real_clients.pinned import RegistryUnreachable

pytestmark = pytest.mark.slow
DOCS_SHOT = Path(__file__).resolve().parents[2] / "docs" / "export-page.png"


@pytest.fixture(scope="module")
def node_modules() -> Path:
    if not (CHROMIUM.exists() and os.access(CHROMIUM, os.X_OK)):
        pytest.skip("Browser test skipped: /usr/bin/chromium is missing (apt-get install chromium).")
    try:
        return ensure_installed()
    except RegistryUnreachable as exc:
        pytest.skip(f"Browser test skipped: {exc}, so playwright-core cannot be installed.")


def _hook(run: RunMajordomus, repo: Path, kind: str, provider: str, payload: dict[str, str],
          event: str | None = None) -> None:
    args = ["capture", kind, "--provider", provider] + (["--event", event] if event else [])
    done = run(*args, cwd=repo, input=json.dumps(payload).encode())
    assert done.returncode == 0, done.stderr.decode()


def test_the_page_loads_nothing_shows_the_timeline_expands_and_filters(
        node_modules: Path, initialised_repo: Path, run_majordomus: RunMajordomus, tmp_path: Path) -> None:
    repo = initialised_repo
    hostile = "render </script><img src=x onerror=alert(1)> as text and fix the tokenizer"
    _hook(run_majordomus, repo, "session", "claude-code", {"session_id": "c1", "source": "startup"}, "start")
    _hook(run_majordomus, repo, "prompt", "claude-code", {"session_id": "c1", "prompt_id": "p1", "prompt": hostile})
    (repo / "tok.py").write_text("x = 1\n")
    git(repo, "add", "tok.py")
    git(repo, "commit", "-q", "-m", "tokenizer: keep the last token")
    _hook(run_majordomus, repo, "session", "claude-code", {"session_id": "c1", "reason": "other"}, "end")
    _hook(run_majordomus, repo, "session", "codex", {"session_id": "x1"}, "start")
    _hook(run_majordomus, repo, "prompt", "codex", {"session_id": "x1", "turn_id": "t1",
                                                     "prompt": "explain the ledger rotation"})
    _hook(run_majordomus, repo, "session", "codex", {"session_id": "x1", "reason": "other"}, "end")
    listed = json.loads(run_majordomus("--json", "episodes", cwd=repo).stdout)["episodes"]
    ids = {e["provider"]: e["id"] for e in listed}
    assert len(ids) == 2

    page = tmp_path / "episodes.html"
    done = run_majordomus("export", "--format", "html", "--with-prompts", "-o", str(page), cwd=repo)
    assert done.returncode == 0, done.stderr.decode()
    shot = tmp_path / "shot.png"
    node = node_modules / ".bin" / "node"
    driven = subprocess.run([str(node), str(Path(__file__).with_name("export_page.js")), str(node_modules /
                             "playwright-core"), str(page), ids["claude-code"], "tokenizer", str(shot)],
                            capture_output=True, text=True, timeout=180, check=False)
    assert driven.returncode == 0, driven.stderr
    seen = json.loads(driven.stdout.strip().splitlines()[-1])
    assert seen["blocked"] == [] and seen["requests"] == [page.as_uri()], seen  # nothing but the file itself
    assert seen["errors"] == [] and seen["images"] == 0, seen  # the <img onerror> stayed text: no image, no alert
    assert [(e["id"], e["state"]) for e in seen["timeline"]] == [(e["id"], e["state"]) for e in listed]
    assert seen["promptVisibleBefore"] is False and seen["promptVisibleAfter"] is True
    assert seen["prompts"] == [hostile]
    assert seen["visibleAfterFilter"] == [ids["claude-code"]] and seen["count"] == "1 of 2 episodes"
    assert seen["visibleAfterClear"] == 2
    assert shot.stat().st_size > 10_000
    if os.environ.get("MAJORDOMUS_WRITE_SCREENSHOT"):
        shutil.copyfile(shot, DOCS_SHOT)
