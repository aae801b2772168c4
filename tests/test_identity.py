"""The provider-session key sanitizer and the identities, as properties over every input."""

from __future__ import annotations

import re
from pathlib import Path

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
