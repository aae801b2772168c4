"""The provider-session key sanitizer and the identities, as properties over every input."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from majordomus.identity import name_key, new_episode_id, now_utc, repository_id, session_key, worktree_id


@given(st.text(max_size=400))
@settings(max_examples=2000)
def test_a_key_is_never_a_separator_a_dot_dot_or_empty(text: str) -> None:
    key = session_key(text)
    assert key and "/" not in key and "\\" not in key and "\0" not in key
    assert ".." not in key and key not in (".", "..")
    assert len(key.encode()) <= 200


@given(st.text(max_size=300), st.text(max_size=300))
@settings(max_examples=2000)
@pytest.mark.slow
def test_distinct_sessions_get_distinct_keys(a: str, b: str) -> None:
    if a != b:
        assert session_key(a) != session_key(b)


def test_ordinary_ids_stay_readable() -> None:
    assert session_key("thread-200-alpha") == "thread-200-alpha"
    assert session_key("0d6b1c2e-9f3a-4c1e-8e7b-3f2a1b0c9d8e") == "0d6b1c2e-9f3a-4c1e-8e7b-3f2a1b0c9d8e"
    assert session_key("../../x") == "%2E%2E%2F%2E%2E%2Fx"


@given(st.text(max_size=200))
def test_a_branch_key_is_a_safe_name_fragment(text: str) -> None:
    key = name_key(text)
    assert re.fullmatch(r"[A-Za-z0-9._-]+", key) and ".." != key and not key.startswith(".")


def test_episode_ids_have_the_declared_shape() -> None:
    assert re.fullmatch(r"s-\d{14}-[0-9a-f]{4}", new_episode_id(now_utc()))


def test_repository_id_strips_user_info_and_worktree_id_is_16_hex(git_repo: Path) -> None:
    import subprocess

    assert repository_id(git_repo).startswith("local:")
    subprocess.run(["git", "-C", str(git_repo), "remote", "add", "origin", "https://me:s3cret@example.invalid/r.git"],
                   check=True)
    assert repository_id(git_repo) == "https://example.invalid/r.git"
    assert re.fullmatch(r"[0-9a-f]{16}", worktree_id(git_repo))


def _git(repo: Path, *args: str) -> str:
    import subprocess

    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout.strip()


def test_head_and_branch_read_from_disk_agree_with_git_in_every_layout(git_repo: Path, tmp_path: Path) -> None:
    from majordomus.identity import head_state

    def agree(repo: Path) -> None:
        branch = _git(repo, "rev-parse", "--abbrev-ref", "HEAD")
        assert head_state(repo) == (branch, _git(repo, "rev-parse", "HEAD"))

    agree(git_repo)
    _git(git_repo, "pack-refs", "--all")  # refs only in packed-refs now
    agree(git_repo)
    _git(git_repo, "checkout", "-q", "-b", "feature/x")
    _git(git_repo, "commit", "-q", "--allow-empty", "-m", "on a branch")
    agree(git_repo)
    worktree = tmp_path / "linked"
    _git(git_repo, "worktree", "add", "-q", str(worktree), "-b", "other")
    agree(worktree)
    _git(git_repo, "checkout", "-q", "--detach")
    assert head_state(git_repo) == ("HEAD", _git(git_repo, "rev-parse", "HEAD"))
    unborn = tmp_path / "unborn"
    unborn.mkdir()
    _git(unborn, "init", "-q", "-b", "trunk")
    assert head_state(unborn) == ("trunk", "NONE")
    assert repository_id(worktree) == repository_id(git_repo)


def test_the_origin_url_is_read_from_the_common_config(git_repo: Path, tmp_path: Path) -> None:
    _git(git_repo, "remote", "add", "upstream", "https://example.invalid/up.git")
    _git(git_repo, "remote", "add", "origin", "git@example.invalid:team/repo.git")
    assert repository_id(git_repo) == "git@example.invalid:team/repo.git"
    worktree = tmp_path / "wt"
    _git(git_repo, "worktree", "add", "-q", str(worktree))
    assert repository_id(worktree) == "git@example.invalid:team/repo.git"


def test_a_child_past_its_deadline_is_killed_and_reported_as_failed(tmp_path: Path) -> None:
    import time

    from majordomus.identity import run_bounded

    started = time.monotonic()
    code, out = run_bounded(["sh", "-c", "echo partial; exec sleep 30"], timeout=0.3)
    assert code is None and out == b"partial\n"
    assert time.monotonic() - started < 20  # killed, not waited for
    assert run_bounded(["sh", "-c", "exit 3"], timeout=5) == (3, b"")
    assert run_bounded(["no-such-program-anywhere"], timeout=5) == (None, b"")


@given(st.datetimes(min_value=datetime(1000, 1, 1)))
def test_epoch_of_reads_a_stored_moment_as_parse_rfc3339_does(moment: datetime) -> None:
    from majordomus.identity import epoch_of, parse_rfc3339

    text = moment.strftime("%Y-%m-%dT%H:%M:%SZ")
    parsed = parse_rfc3339(text)
    assert parsed is not None and epoch_of(text) == int(parsed.timestamp())


@given(st.text(alphabet="0123456789-T:Z ", max_size=24) | st.text(max_size=24))
def test_epoch_of_refuses_what_parse_rfc3339_refuses(text: str) -> None:
    from majordomus.identity import epoch_of, parse_rfc3339

    parsed = parse_rfc3339(text)
    assert epoch_of(text) == (None if parsed is None else int(parsed.timestamp()))
