"""`majordomus export` (Markdown, JSON, a self-contained HTML page) through the installed executable, over
histories drawn by the real hooks."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from conftest import RunMajordomus
from history.test_episodes_show_search import World
from support import unique_prefix


@pytest.fixture(name="world")
def _world(initialised_repo: Path, run_majordomus: RunMajordomus) -> World:
    return World(initialised_repo, run_majordomus)


@pytest.fixture(name="history")
def _history(world: World) -> dict[str, str]:
    """As in test_episodes_show_search.py: an interrupted Claude episode (two prompts, a commit), an interrupted
    Codex one, and an open one."""
    ids = {"claude": world.start("claude-1")}
    world.prompt("claude-1", "rotate the api_key = 'Zx81kd02kdkLLqw0ss9' and fix the tokenizer")
    ids["commit"] = world.commit("parser.py", "teach the parser unicode")
    world.prompt("claude-1", "now write the tests for the tokenizer, please")
    world.end("claude-1", "other")
    ids["codex"] = world.start("codex-1", "codex")
    world.prompt("codex-1", "explain the ledger rotation", "codex")
    ids["codex_commit"] = world.commit("ledger.md", "document the ledger")
    world.end("codex-1", "other", "codex")
    ids["open"] = world.start("claude-2")
    return ids


HOSTILE = "look </script><script>alert(1)</script><img src=x onerror=alert(2)> & \"quote\""


def test_markdown_withholds_prompt_texts_unless_asked(world: World, history: dict[str, str]) -> None:
    md = world.text("export")
    assert md.startswith("# Episodes of ")
    for key in ("claude", "codex", "open"):
        assert f"## {history[key]} — " in md
    assert "teach the parser unicode" in md and "prompt texts withheld" in md
    assert "tokenizer" not in md and "ledger rotation" not in md  # private by default
    full = world.text("export", "--with-prompts", unique_prefix(history["claude"], [history["codex"], history["open"]]))
    assert "now write the tests for the tokenizer, please" in full and "Zx81kd02kdkLLqw0ss9" not in full
    assert history["codex"] not in full


def test_json_has_the_show_shape_per_episode(world: World, history: dict[str, str]) -> None:
    data = world.json("export")
    assert data["schema"] == "majordomus.export/v1" and data["count"] == 3 and data["with_prompts"] is False
    shown = world.json("show", history["claude"])
    item = next(i for i in data["episodes"] if i["episode"]["id"] == history["claude"])
    assert set(item) == set(shown) - {"schema"}
    assert item["commits"] == shown["commits"] and item["diff_stat"] == shown["diff_stat"]
    assert [p["text"] for p in item["prompts"]] == [None, None]
    assert all(p["text_withheld"] for p in item["prompts"])
    full = json.loads(world.ok("export", "--format", "json", "--with-prompts", history["claude"]).stdout)
    assert [p["text"] for p in full["episodes"][0]["prompts"]] == [p["text"] for p in shown["prompts"]]
    since = json.loads(world.ok("export", "--format", "json", "--until", "2000-01-01").stdout)
    assert since["count"] == 0 and since["episodes"] == []


def test_html_is_self_contained_and_escapes_everything(world: World) -> None:
    world.start("h1")
    world.prompt("h1", HOSTILE)
    world.end("h1", "other")
    page = world.ok("export", "--format", "html", "--with-prompts").stdout.decode()
    assert page.startswith("<!doctype html>") and page.count("<script>") == 1 and "</script><script>" not in page
    assert "<img" not in page and "&lt;img src=x onerror=alert(2)&gt;" in page
    assert "&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in page and "&amp; &quot;quote&quot;" in page
    assert "http://" not in page and "https://" not in page and "file:" not in page
    assert "default-src 'none'" in page
    lowered = page.lower()
    for external in ("src=\"", "href=\"", "url(", "@import"):
        assert external not in lowered, external


def test_o_is_0600_whatever_the_umask_and_replaced_whole(world: World, history: dict[str, str],
                                                          tmp_path: Path) -> None:
    target = tmp_path / "out.html"
    target.write_text("old")
    os.chmod(target, 0o644)
    done = subprocess.run(["sh", "-c", 'umask 000; exec "$0" "$@"', str(Path(os.environ["PATH"].split(":")[0])
                                                                          / "majordomus"),
                           "export", "--format", "html", "-o", str(target)], cwd=world.repo, capture_output=True,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE(target.stat().st_mode) == 0o600 and target.read_text().startswith("<!doctype html>")
    assert b"3 episode(s) written to" in done.stderr and done.stdout == b""
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_o_never_follows_a_symlink_and_an_unwritable_o_says_so(world: World, history: dict[str, str],
                                                               tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    link = tmp_path / "link.md"
    link.symlink_to(victim)
    done = world.run("export", "-o", str(link), cwd=world.repo)
    assert done.returncode == 15 and b"is a symbolic link" in done.stderr and b"Traceback" not in done.stderr
    assert victim.read_text() == "keep me" and link.is_symlink()
    missing = world.run("export", "-o", str(tmp_path / "no" / "such" / "dir.md"), cwd=world.repo)
    assert missing.returncode == 13 and b"cannot write -o" in missing.stderr and b"Traceback" not in missing.stderr
    locked = tmp_path / "locked"
    locked.mkdir()
    os.chmod(locked, 0o500)
    try:
        if os.access(locked, os.W_OK):
            pytest.skip("running as a user that writes anywhere (root): an unwritable directory cannot be made")
        done = world.run("export", "-o", str(locked / "x.md"), cwd=world.repo)
    finally:
        os.chmod(locked, 0o700)
    assert done.returncode == 13 and b"cannot write -o" in done.stderr and b"Traceback" not in done.stderr
    assert list((tmp_path / "locked").iterdir()) == []


def test_unknown_and_ambiguous_ids_list_candidates(world: World, history: dict[str, str]) -> None:
    done = world.run("export", "s-1999", cwd=world.repo)
    assert done.returncode == 12 and b"no episode id starts with 's-1999'" in done.stderr
    done = world.run("export", "s-2", cwd=world.repo)
    assert done.returncode == 2 and b"is ambiguous: it names 3 episodes" in done.stderr
    for key in ("claude", "codex", "open"):
        assert history[key].encode() in done.stderr
    assert b"Traceback" not in done.stderr


def test_an_empty_archive_gives_a_page_that_says_so(world: World) -> None:
    page = world.ok("export", "--format", "html").stdout.decode()
    assert "No episodes are recorded here yet." in page
    assert "No episodes are recorded here yet." in world.text("export")
    assert world.json("export")["count"] == 0


def test_bad_format_is_a_usage_sentence(world: World, run_majordomus: RunMajordomus) -> None:
    done = run_majordomus("export", "--format", "pdf", cwd=world.repo)
    assert done.returncode == 2 and b"invalid choice" in done.stderr and b"Traceback" not in done.stderr
