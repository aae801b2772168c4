"""The hook's stand-ins for `os`, `pathlib` and `typing` (majordomus.lean) answer what the standard modules answer.

Under `python -IS` (how every wired hook starts) the launcher registers them before majordomus is imported, and
the hook path's ordinary `import os` gets `posix` and a few functions of its own. These hold them to posixpath
and `os` on generated paths, and on a real tree of directories, files and links (relative, absolute, chained,
dangling, looping); a name a stand-in does not define is the standard module's; the launcher's run under `-IS`
is held to import no standard `os`, `pathlib` or `typing` at all, and to write what the console entry writes
(test_golden_writes.py runs its scenario both ways).
"""

from __future__ import annotations

import os
import posixpath
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import majordomus_hook
from majordomus.lean import forwarding, standard
from majordomus.lean.os import LeanPath, lean_makedirs, stand_in
from support import records

PART = st.sampled_from(["", ".", "..", "a", "b", "c.d", "l1", "l2", "loop", "gone", "abs", "f", "..."])
PATHS = st.builds(lambda lead, parts, trail: lead + "/".join(parts) + trail, st.sampled_from(["", "/", "//", "///"]),
                  st.lists(PART, max_size=7), st.sampled_from(["", "/", "//"]))


@given(PATHS, st.lists(PATHS, max_size=3))
def test_the_string_functions_answer_as_posixpath(path: str, more: list[str]) -> None:
    assert LeanPath.join(path, *more) == posixpath.join(path, *more)
    assert LeanPath.split(path) == posixpath.split(path)
    assert LeanPath.dirname(path) == posixpath.dirname(path)
    assert LeanPath.basename(path) == posixpath.basename(path)
    assert LeanPath.isabs(path) == posixpath.isabs(path)
    assert LeanPath.normpath(path) == posixpath.normpath(path)
    assert LeanPath.abspath(path) == posixpath.abspath(path)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """a/b/ (dirs), a/f (a file), links: l1 → a, a/l2 → ../a/b, abs → <root>/a, loop ↔ loop2, gone → nowhere."""
    root = tmp_path_factory.mktemp("tree").resolve()
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "f").write_text("x")
    (root / "c.d").mkdir()
    os.symlink("a", root / "l1")
    os.symlink("../a/b", root / "a" / "l2")
    os.symlink(str(root / "a"), root / "abs")
    os.symlink("loop2", root / "loop")
    os.symlink("loop", root / "loop2")
    os.symlink("nowhere", root / "gone")
    os.symlink("l1/l2", root / "b")  # a chain: b → l1/l2 → a/l2 → a/b
    return root


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=400)
@given(st.lists(PART, max_size=6), st.booleans())
def test_realpath_and_the_file_tests_answer_as_os_on_a_real_tree(tree: Path, parts: list[str], absolute: bool) -> None:
    relative = "/".join(parts)
    path = str(tree / relative) if absolute else relative
    here = os.getcwd()
    os.chdir(tree)
    try:
        assert LeanPath.realpath(path) == os.path.realpath(path)
        assert LeanPath.exists(path) == os.path.exists(path)
        assert LeanPath.isdir(path) == os.path.isdir(path)
        assert LeanPath.isfile(path) == os.path.isfile(path)
        assert LeanPath.islink(path) == os.path.islink(path)
    finally:
        os.chdir(here)


def test_makedirs_makes_every_missing_folder_and_keeps_exist_ok(tmp_path: Path) -> None:
    lean_makedirs(str(tmp_path / "x" / "y" / "z"), 0o700)
    assert (tmp_path / "x" / "y" / "z").is_dir()
    lean_makedirs(str(tmp_path / "x" / "y" / "z"), exist_ok=True)
    with pytest.raises(FileExistsError):
        lean_makedirs(str(tmp_path / "x" / "y" / "z"))
    (tmp_path / "file").write_text("")
    with pytest.raises(FileExistsError):
        lean_makedirs(str(tmp_path / "file"), exist_ok=True)  # a file is no folder, as os.makedirs says


def test_the_lean_module_has_what_the_hook_path_takes_from_os() -> None:
    made = stand_in(forwarding("os"), standard)
    assert made.environ == dict(os.environ)
    assert (made.devnull, made.sep, made.SEEK_SET, made.SEEK_END) == (os.devnull, os.sep, os.SEEK_SET, os.SEEK_END)
    for name in ("open", "read", "write", "close", "fsync", "lstat", "replace", "link", "scandir", "posix_spawnp",
                 "POSIX_SPAWN_OPEN", "waitstatus_to_exitcode", "O_NOFOLLOW", "O_DIRECTORY", "urandom", "fspath"):
        assert getattr(made, name) is getattr(os, name), name


# the launcher's module run as the installed script runs it under -IS (the dev venv's editable install is found
# through a .pth file, which only `site` reads: the source folder goes on sys.path instead)
LAUNCH = ("import sys; sys.path.insert(0, sys.argv.pop(1)); import majordomus_hook; "
          "raise SystemExit(majordomus_hook.main(sys.argv[1:]))")
SRC = str(Path(majordomus_hook.__file__).parent)


def test_the_launcher_under_minus_is_imports_no_os(initialised_repo: Path) -> None:
    """The wired hooks' own start (`python -IS majordomus-hook …`): nothing of `os` is loaded for a start, a
    plain prompt and an end, and each does its work (an episode recorded, a prompt archived, nothing logged)."""
    runs = [(["capture", "session", "--provider", "claude-code", "--event", "start"], b'{"session_id": "lean-1"}'),
            (["capture", "prompt", "--provider", "claude-code"],
             b'{"session_id": "lean-1", "prompt": "refactor module 3 and keep the tests green"}'),
            (["capture", "session", "--provider", "claude-code", "--event", "end"],
             b'{"session_id": "lean-1", "reason": "other"}')]
    for args, payload in runs:
        done = subprocess.run([sys.executable, "-IS", "-X", "importtime", "-c", LAUNCH, SRC, *args],
                              input=payload, capture_output=True, cwd=initialised_repo, timeout=60)
        assert done.returncode == 0, done.stderr.decode()
        loaded = {line.split("|")[-1].strip() for line in done.stderr.decode().splitlines()
                  if line.startswith("import time:")}
        assert "majordomus.cli" in loaded, done.stderr.decode()[-2000:]
        assert not loaded & {"os", "posixpath", "stat", "genericpath", "pathlib", "typing"}, (args, sorted(loaded))
    assert not (initialised_repo / ".ai/local/hook-failures.log").exists()
    assert len(list((initialised_repo / ".ai/local/prompts").glob("*.json"))) == 1
    assert len(records(initialised_repo)) == 1


# a process as the launcher leaves it: the stand-ins registered under -IS, then what a hook-path module might do
STANDING = ("import sys; sys.path.insert(0, sys.argv.pop(1)); from majordomus.lean import enter; enter(); "
            "import os, pathlib, typing; assert os.__lean__ and pathlib.__lean__ and typing.__lean__; ")


def run_standing(code: str) -> str:
    done = subprocess.run([sys.executable, "-IS", "-c", STANDING + code, SRC], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_name_the_os_stand_in_does_not_define_is_the_standard_modules() -> None:
    """`os.walk` and `os.path.normcase` are no hook's: asked for anyway, they come from the standard `os`,
    which from then on is `sys.modules["os"]`, and the answers are its answers."""
    out = run_standing("w = os.walk; n = os.path.normcase('/A/b'); import os as again; "
                       "print(w is again.walk, n, getattr(again, '__lean__', False), again.path.join('a', 'b'))")
    assert out.split() == ["True", "/A/b", "False", "a/b"]


def test_the_typing_stand_in_gives_type_checking_and_the_standard_typing_for_the_rest() -> None:
    out = run_standing("from typing import TYPE_CHECKING; print(TYPE_CHECKING, 'typing' in sys.modules and "
                       "getattr(sys.modules['typing'], '__lean__', False)); from typing import Literal; "
                       "print(Literal['a'] == __import__('typing').Literal['a'], sys.modules['typing'].__lean__ "
                       "if hasattr(sys.modules['typing'], '__lean__') else 'standard')")
    assert out.split() == ["False", "True", "True", "standard"]


def test_a_path_method_the_pathlib_stand_in_does_not_define_runs_on_the_standard_path(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("x")
    out = run_standing(f"p = pathlib.Path({str(tmp_path)!r}); print(type(p).__name__, "
                       "sorted(x.name for x in p.glob('*.txt')), (p / 'a.txt').read_text(), p.name == "
                       f"{tmp_path.name!r})")
    assert out.split() == ["LitePath", "['a.txt']", "x", "True"]
