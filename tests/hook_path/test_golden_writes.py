"""The lean hook path writes byte for byte what the hook wrote before it (records, renderings, open
files, working contexts, closed records, the ledger, the logs, the report lines).

`golden_writes.json` was produced by the code of main at dd17aba (before the hook path lost pathlib, re,
json and datetime) by this same scenario, with `--regenerate`-style use of `scenario()`; each step runs the real
`majordomus` console entry in its own interpreter, with the clock and `os.urandom` fixed by a small preamble, in
a real git repository whose commit is fixed too. Paths and the worktree id (which name the temp directory) are
replaced by placeholders before comparing. The scenario runs twice: through the console entry, and as the wired
hooks start (`python -IS`, where the hook path imports no standard `os`: majordomus.lean).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

GOLDEN = Path(__file__).with_name("golden_writes.json")
CLOCK = 1796284800  # 2026-12-03T08:00:00Z

# The real console entry, with a fixed clock and fixed randomness: `time.time` for the lean path, the
# `datetime` name of majordomus.identity for the code the golden file came from.
PREAMBLE = """
import os, sys, time, io
clock = float(sys.argv[1]); seed = [0]
def urandom(n):
    seed[0] += 1
    return bytes((seed[0] * 7 + i * 13) % 256 for i in range(n))
os.urandom = urandom
time.time = lambda: clock
import majordomus.identity as ident
if hasattr(ident, "datetime"):
    class Fixed(ident.datetime):
        @classmethod
        def now(cls, tz=None):
            return ident.datetime.fromtimestamp(clock, tz)
    ident.datetime = Fixed
payload = bytes.fromhex(sys.argv[2])
sys.argv = ["majordomus", *sys.argv[3:]]
sys.stdin = io.TextIOWrapper(io.BytesIO(payload))
"""
ENTRY = PREAMBLE + """
from majordomus.cli import main
raise SystemExit(main())
"""
# The same under `python -IS`, as the wired hooks start: the launcher's stand-ins registered (majordomus.lean: `os`
# served from `posix`, whose urandom is fixed instead), no standard `os` imported, and the source folder stands in
# for the site-packages
LEAN_ENTRY = ("import posix, sys\nsys.path.insert(0, sys.argv.pop(1))\n"
              + PREAMBLE.replace("import os, sys, time, io", "import sys, time, io")
              .replace("os.urandom = urandom", "posix.urandom = urandom")  # before enter(): the stand-in copies posix
              .replace("import majordomus.identity as ident", "from majordomus.lean import enter\nenter()\n"
                                                              "import majordomus.identity as ident")
              + "import majordomus.cli\n"
                "assert getattr(sys.modules['os'], '__lean__', False), 'the standard os imported'\n"
                "raise SystemExit(majordomus.cli.main())\n")
SRC = str(Path(__file__).resolve().parents[2] / "src")

PROMPTS = [
    {"session_id": "gold-1", "prompt_id": "p-1", "prompt": "please refactor module 3 and keep the tests green",
     "cwd": "/somewhere/else"},
    {"session_id": "gold-1", "prompt_id": "p-2",
     "prompt": "rotate the api_key = 'Zx81kd02kdkLLqw0ss9' in the vault, then run the tests"},
    {"session_id": "gold-1", "prompt_id": "p-3",
     "prompt": "fix `x` and ``y`` — naïve café \u2028 next\x01 tab\t \"quoted\" back\\slash | pipe\n\nsecond"},
    {"session_id": "gold-1", "prompt_id": "p-4", "prompt": "  leading blanks, and a trailing newline\n"},
    {"session_id": "gold-1", "prompt_id": "p-1", "prompt": "a redelivery of p-1"},
    {"session_id": "gold-1", "prompt": "<system-reminder> injected </system-reminder>"},
    {"session_id": "nobody", "prompt": "an orphan without an id: ÅÄÖ 日本語 \U0001f600"},
    {"session_id": "gold-1", "prompt_id": "p-5", "prompt": "ends with three backticks ```"},
    {"session_id": "gold-1", "prompt_id": "p-6", "prompt": "C1 control \x85 and \ufffe"},
    {"session_id": "gold-1", "prompt_id": 7, "prompt": "a numeric id, HEAD is fine", "source": "user"},
]
RAW_PROMPTS = [b"not json at all", b'["an", "array"]', b'{"session_id": "gold-1", "prompt": 5}',
               b'{"session_id": "gold-1", "prompt_id": "p-8", "prompt": "a lone \\ud800 surrogate"}']


def _step(root: Path, payload: bytes, *args: str) -> str:
    _step.count += 1  # type: ignore[attr-defined]
    clock = CLOCK + 61 * _step.count  # type: ignore[attr-defined]  # a minute and a second between steps
    entry = [sys.executable, "-IS", "-c", LEAN_ENTRY, SRC] if _step.lean else [  # type: ignore[attr-defined]
        sys.executable, "-c", ENTRY]
    done = subprocess.run([*entry, str(clock), payload.hex(), "--repo", str(root), *args],
                          capture_output=True, text=True, cwd=root)
    return f"exit {done.returncode}: {done.stdout}{done.stderr}"


def scenario(root: Path, lean: bool = False) -> dict[str, object]:
    """Every hook command over fixed payloads, then every file under .ai/ (locks aside), normalised."""
    _step.count = 0  # type: ignore[attr-defined]
    _step.lean = lean  # type: ignore[attr-defined]
    session = ("capture", "session", "--provider", "claude-code", "--event")
    prompt = ("capture", "prompt", "--provider", "claude-code")
    lines = [_step(root, json.dumps({"session_id": "gold-1", "source": "startup"}).encode(), *session, "start")]
    lines += [_step(root, json.dumps(p).encode(), *prompt) for p in PROMPTS]
    lines += [_step(root, raw, *prompt) for raw in RAW_PROMPTS]
    lines.append(_step(root, json.dumps({"session_id": "gold-1"}).encode(), *session, "compact"))
    lines.append(_step(root, json.dumps({"session_id": "gold-1"}).encode(), *session, "turn"))
    lines.append(_step(root, b"{}", *session, "start"))
    lines.append(_step(root, json.dumps({"session_id": "gold-1", "reason": "logout"}).encode(), *session, "end"))
    lines.append(_step(root, json.dumps({"session_id": "gold-1", "reason": "logout"}).encode(), *session, "end"))
    lines.append(_step(root, json.dumps({"session_id": "gold-2", "source": "resume"}).encode(), *session, "start"))
    lines.append(_step(root, json.dumps({"session_id": "gold-2", "prompt_id": "q-1", "prompt": "second"}).encode(),
                       *prompt))
    lines.append(_step(root, json.dumps({"session_id": "gold-2", "reason": "other"}).encode(), *session, "end"))
    files: dict[str, str] = {}
    for here, dirs, names in os.walk(root / ".ai"):
        dirs.sort()
        for name in sorted(names):
            path = Path(here) / name
            rel = str(path.relative_to(root))
            if "/locks/" in rel or (name.startswith("patterns.") and name.endswith(".marshal")) \
                    or name == "policy.cache.json":
                continue  # caches: the compiled patterns (majordomus.lean.kept_patterns), the parsed policy
            files[rel] = path.read_bytes().decode("utf-8", "surrogateescape")
    return normalise(root, {"lines": lines, "files": files})


def normalise(root: Path, found: dict[str, object]) -> dict[str, object]:
    from majordomus.identity import worktree_id

    text = json.dumps(found, ensure_ascii=True, sort_keys=True)
    for real, mark in ((worktree_id(root), "<WORKTREE-ID>"), (str(root.resolve()), "<ROOT>"), (str(root), "<ROOT>")):
        text = text.replace(json.dumps(real)[1:-1], mark)
    result: dict[str, object] = json.loads(text)
    return result


def _world(tmp_path: Path) -> Path:
    root = tmp_path / "gold"
    root.mkdir()
    env = {**os.environ, "GIT_AUTHOR_DATE": "2026-12-01T08:00:00Z", "GIT_COMMITTER_DATE": "2026-12-01T08:00:00Z"}
    for cmd in (["git", "init", "-q", "-b", "main"], ["git", "remote", "add", "origin", "git@example.invalid:g/h.git"],
                ["git", "commit", "-q", "--allow-empty", "-m", "first"], ["majordomus", "init"]):
        subprocess.run(cmd, cwd=root, check=True, capture_output=True, env=env)
    # the layer init wrote is committed, so the working tree is clean at the start, as in a real repository
    subprocess.run(["git", "add", "-A"], cwd=root, check=True, env=env)
    subprocess.run(["git", "commit", "-q", "-m", "layer"], cwd=root, check=True, env=env)
    return root


@pytest.mark.slow
@pytest.mark.parametrize("launch", ["console-entry", "minus-IS-without-os"])
def test_the_hook_path_writes_what_it_wrote_before(tmp_path: Path, launch: str) -> None:
    found = scenario(_world(tmp_path), lean=launch != "console-entry")
    if os.environ.get("MAJORDOMUS_REGENERATE_GOLDEN") == "1" and launch == "console-entry":
        GOLDEN.write_text(json.dumps(found, indent=1, ensure_ascii=True, sort_keys=True) + "\n")
    expected = json.loads(GOLDEN.read_text())
    assert found["lines"] == expected["lines"]
    assert sorted(found["files"]) == sorted(expected["files"])  # type: ignore[call-overload]
    for name, body in expected["files"].items():
        assert found["files"][name] == body, name  # type: ignore[index]
