"""The layer exists after init and init refuses a second time, through the real executable."""

from __future__ import annotations

import stat
from pathlib import Path


def test_init_creates_the_layer_with_private_local_state(git_repo: Path, run_majordomus) -> None:
    done = run_majordomus("init", cwd=git_repo)
    assert done.returncode == 0, done.stderr
    assert (git_repo / ".ai/repo/policy.yaml").is_file()
    assert stat.S_IMODE((git_repo / ".ai/local/prompts").stat().st_mode) == 0o700
    assert ".ai/local/" in (git_repo / ".gitignore").read_text().splitlines()


def test_init_on_an_existing_layer_is_refused_and_names_update(git_repo: Path, run_majordomus) -> None:
    run_majordomus("init", cwd=git_repo)
    done = run_majordomus("init", cwd=git_repo)
    assert done.returncode == 15
    assert b"majordomus update" in done.stderr
