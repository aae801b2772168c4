"""`episodes`, `show` and `search` read the record back — through the installed
`majordomus` in real repositories whose episodes and prompts were drawn by the real hook commands."""

from __future__ import annotations

import json
import os
import pty
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest

from conftest import MAJORDOMUS, RunMajordomus, git, make_repo
from mcp_support import INITIALIZED, call, initialize, run_mcp
from support import unique_prefix

INDEX = ".ai/local/state/search.sqlite3"


class World:
    """A repository and the hook commands a client would run in it."""

    def __init__(self, repo: Path, run: RunMajordomus) -> None:
        self.repo = repo
        self.run = run

    def ok(self, *args: str, input: bytes = b"") -> subprocess.CompletedProcess:
        done = self.run(*args, cwd=self.repo, input=input)
        assert done.returncode == 0, (args, done.stderr.decode())
        return done

    def start(self, ps: str, provider: str = "claude-code") -> str:
        line = self.ok("capture", "session", "--provider", provider, "--event", "start",
                       input=json.dumps({"session_id": ps, "source": "startup"}).encode()).stderr.decode()
        assert "opened at" in line, line
        return line.split()[1]

    def prompt(self, ps: str, text: str, provider: str = "claude-code") -> None:
        key = {"claude-code": "prompt_id", "codex": "turn_id"}[provider]
        self.ok("capture", "prompt", "--provider", provider,
                input=json.dumps({"session_id": ps, key: f"id-{text[:40]}", "prompt": text}).encode())

    def end(self, ps: str, reason: str, provider: str = "claude-code") -> None:
        line = self.ok("capture", "session", "--provider", provider, "--event", "end",
                       input=json.dumps({"session_id": ps, "reason": reason}).encode()).stderr.decode()
        assert "episode closed" in line, line

    def commit(self, name: str, subject: str) -> str:
        (self.repo / name).write_text(f"{subject}\n")
        git(self.repo, "add", name)
        git(self.repo, "commit", "-q", "-m", subject)
        return git(self.repo, "rev-parse", "HEAD")

    def json(self, *args: str) -> Any:
        return json.loads(self.ok("--json", *args).stdout)

    def text(self, *args: str) -> str:
        return self.ok(*args).stdout.decode()


@pytest.fixture
def world(initialised_repo: Path, run_majordomus: RunMajordomus) -> World:
    return World(initialised_repo, run_majordomus)


@pytest.fixture
def history(world: World) -> dict[str, str]:
    """An interrupted Claude episode with two prompts and a commit, then a closed Codex one, then an open one."""
    ids = {"claude": world.start("claude-1")}
    world.prompt("claude-1", "rotate the api_key = 'Zx81kd02kdkLLqw0ss9' and fix the tokenizer")
    ids["commit"] = world.commit("parser.py", "teach the parser unicode")
    world.prompt("claude-1", "now write the tests for the tokenizer, please")
    world.end("claude-1", "other")
    ids["codex"] = world.start("codex-1", "codex")
    world.prompt("codex-1", "explain the ledger rotation", "codex")
    ids["codex_commit"] = world.commit("ledger.md", "document the ledger")
    world.end("codex-1", "other", "codex")  # no finished turn: interrupted too, by codex
    ids["open"] = world.start("claude-2")
    return ids


# -- 1. episodes -----------------------------------------------------------------------------------------------
def test_episodes_lists_newest_first_with_its_columns_and_no_colour_when_piped(world: World, history: dict[str, str]
                                                                             ) -> None:
    lines = world.text("episodes").splitlines()
    assert [ln.split()[0] for ln in lines] == [history["open"], history["codex"], history["claude"]]
    assert "\x1b" not in "\n".join(lines)
    cells = lines[2].split()
    assert cells[1:3] == ["claude-code", "interrupted"] and cells[6] == "main" and cells[7] == "2"
    assert lines[2].endswith(f"Session {history['claude']} on main")
    assert lines[0].split()[2] == "open" and lines[0].split()[5].endswith("+")  # still running


def test_episodes_colours_the_outcome_on_a_terminal_only(world: World, history: dict[str, str]) -> None:
    leader, follower = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"} | {"TERM": "xterm"}
    done = subprocess.run([str(MAJORDOMUS), "episodes"], cwd=world.repo, stdout=follower, stderr=subprocess.PIPE,
                          env=env, timeout=60, check=False)
    os.close(follower)
    out = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    os.close(leader)
    assert done.returncode == 0, done.stderr
    assert b"\x1b[31minterrupted" in out and b"\x1b[36mopen" in out


def test_episodes_json_has_the_documented_shape(world: World, history: dict[str, str]) -> None:
    data = world.json("episodes")
    assert data["schema"] == "majordomus.episodes/v1" and data["count"] == 3
    first = data["episodes"][2]
    assert set(first) == {"id", "provider", "state", "outcome", "started_at", "closed_at", "duration_seconds",
                          "branch", "prompts", "title", "end_reason", "last_turn", "worktree_id", "record",
                          "usage"}
    assert first["id"] == history["claude"] and first["prompts"] == 2 and first["outcome"] == "interrupted"
    assert first["end_reason"] == "other" and first["last_turn"] == "running"
    assert first["record"].startswith(".ai/repo/sessions/") and (world.repo / first["record"]).is_file()
    opened = data["episodes"][0]
    assert opened["state"] == "open" and opened["outcome"] is None and opened["closed_at"] is None
    assert world.json("episodes", "-n", "1")["count"] == 1  # the global --json and the command's agree:
    again = json.loads(world.ok("episodes", "--json").stdout)
    assert [(e["id"], e["state"], e["prompts"]) for e in again["episodes"]] == \
        [(e["id"], e["state"], e["prompts"]) for e in data["episodes"]]


def test_episodes_filters(world: World, history: dict[str, str]) -> None:
    def ids(*args: str) -> list[str]:
        return [e["id"] for e in world.json("episodes", *args)["episodes"]]

    assert ids("--provider", "codex") == [history["codex"]]
    assert ids("--outcome", "interrupted") == [history["codex"], history["claude"]]
    assert ids("--open") == [history["open"]]
    assert ids("--branch", "main", "-n", "2") == [history["open"], history["codex"]]
    assert ids("--branch", "elsewhere") == []
    assert ids("--since", "2d") == ids() and ids("--until", "2001-01-01") == []
    assert ids("--since", "2999-01-01T00:00:00Z") == []
    assert world.text("episodes", "--provider", "gemini") == "no episodes match these filters\n"


@pytest.mark.parametrize(("args", "says"), [
    (["--since", "yesterday"], "--since 'yesterday' is not a time majordomus reads"),
    (["-n", "0"], "-n takes a whole number of episodes above 0"),
    (["--outcome", "lost"], "invalid choice: 'lost'"),
    (["--since", "2026-12-02", "--until", "2026-12-01"], "is after --until"),
])
def test_episodes_bad_filters_say_what_to_do(world: World, args: list[str], says: str) -> None:
    done = world.run("episodes", *args, cwd=world.repo)
    assert done.returncode == 2 and says in done.stderr.decode() and b"Traceback" not in done.stderr


def test_open_and_detached_connection_episodes_are_shown_with_their_state(world: World) -> None:
    """A connection episode whose client went away is detached (not closed) until the grace runs out."""
    run_mcp(world.repo, [initialize(), INITIALIZED, call(2, "majordomus_session_attach", {"external_id": "thr-1"})],
            "--http-port", "0")
    held = world.start("claude-9")
    data = world.json("episodes")["episodes"]
    states = {e["id"]: (e["provider"], e["state"]) for e in data}
    assert states[held] == ("claude-code", "open")
    assert sorted(states.values()) == [("claude-code", "open"), ("generic", "detached")]
    assert sorted(e["state"] for e in world.json("episodes", "--open")["episodes"]) == ["detached", "open"]
    (line,) = world.text("episodes", "--outcome", "detached").splitlines()
    assert line.split()[1:3] == ["generic", "detached"]


def test_an_empty_history_and_a_missing_layer(world: World, tmp_path: Path) -> None:
    assert world.text("episodes") == "no episodes recorded here yet\n"
    assert world.json("episodes") == {"schema": "majordomus.episodes/v1", "count": 0, "episodes": []}
    assert world.text("search", "anything") == "no match for 'anything' in 0 prompt record(s) and 0 episode record(s)\n"
    bare = world.run("episodes", cwd=make_repo(tmp_path / "plain"))
    assert bare.returncode == 12 and b"majordomus init" in bare.stderr


# -- 2. show ---------------------------------------------------------------------------------------------------
def test_show_an_interrupted_episode_whole(world: World, history: dict[str, str]) -> None:
    out = world.text("show", unique_prefix(history["claude"], [history["codex"], history["open"]]))
    assert out.startswith(f"episode {history['claude']}  interrupted (reason other, last turn running)\n")
    prompts = out[out.index("prompts (2)"):out.index("commits (")]
    first, second = prompts.index("rotate the api_key"), prompts.index("now write the tests")
    assert first < second  # in the order they were captured
    assert "open  redacted: assignment" in prompts and "Zx81kd02kdkLLqw0ss9" not in out
    assert "[redacted:assignment]" in prompts
    short = history["commit"][:7]
    assert "commits (1, git log " in out and f"  {short} teach the parser unicode" in out
    assert "parser.py | 1 +" in out and "1 file changed" in out
    assert "resume       claude --resume claude-1   (the client's session from .ai/local/session-contexts" in out


def test_show_json_and_the_codex_resume_command(world: World, history: dict[str, str]) -> None:
    data = world.json("show", history["codex"])
    assert data["schema"] == "majordomus.show/v1" and data["episode"]["id"] == history["codex"]
    assert data["resume"]["command"] == "codex resume codex-1" and "codex" in data["resume"]["evidence"]
    assert [c["subject"] for c in data["commits"]["items"]] == ["document the ledger"]
    assert [p["episode_link"] for p in data["prompts"]] == ["open"]
    assert data["prompts"][0]["text"] == "explain the ledger rotation"
    assert "ledger.md" in data["diff_stat"]["text"]


def test_a_closed_episode_has_no_resume_and_a_commit_names_its_episode_as_evidence(world: World) -> None:
    sid = world.start("done-1")
    sha = world.commit("x.txt", "the x file")
    world.end("done-1", "prompt_input_exit")  # deliberate: closed
    assert world.json("show", sid)["resume"] is None and "resume " not in world.text("show", sid)
    said = world.text("show", sha[:10])
    assert said.startswith(f"commit {sha[:12]} (the x file) is inside the window of {sid}: committed ")
    assert "not from its start head" in said and "in worktree " in said
    data = world.json("show", sha)
    assert data["ambiguous"] is False and [c["episode"]["id"] for c in data["candidates"]] == [sid]


def test_a_commit_inside_two_windows_is_ambiguous_and_lists_both(world: World) -> None:
    a = world.start("both-a")
    b = world.start("both-b", "codex")
    sha = world.commit("shared.txt", "made while two agents were open")
    world.end("both-a", "logout")
    world.end("both-b", "other", "codex")
    out = world.text("show", sha)
    assert "is ambiguous: 2 episodes' windows contain it, and none is chosen" in out
    assert f"  {a}  claude-code  closed" in out and f"  {b}  codex  interrupted" in out
    data = world.json("show", sha)
    assert data["ambiguous"] is True and {c["episode"]["id"] for c in data["candidates"]} == {a, b}


def test_a_commit_outside_every_window_is_said_so_and_never_guessed(world: World) -> None:
    before = world.commit("early.txt", "before any episode")
    sid = world.start("later")
    world.end("later", "logout")
    out = world.text("show", before)
    assert "is inside no episode's window" in out and sid not in out
    first = git(world.repo, "rev-list", "--max-parents=0", "HEAD")
    assert world.json("show", first)["candidates"] == []


def test_an_open_episode_shows_its_window_so_far(world: World, history: dict[str, str]) -> None:
    sha = world.commit("wip.txt", "work in progress")
    out = world.text("show", history["open"])
    assert out.startswith(f"episode {history['open']}  open") and "(now)" in out
    assert f"  {sha[:7]} work in progress" in out and "resume " not in out
    assert history["open"] in world.text("show", sha)


@pytest.mark.parametrize(("arg", "code", "says"), [
    ("s-", 2, "majordomus: 's-' is ambiguous: it names 3 episode(s); give more of the id\n  s-"),
    ("s-1999", 12, "no episode id starts with 's-1999', and it is not a commit of this repository"),
    ("deadbeefdeadbeef", 12, "no episode id starts with 'deadbeefdeadbeef', and it is not a commit"),
    ("--", 2, "show"),
])
def test_show_bad_names_list_candidates_or_say_what_to_run(world: World, history: dict[str, str], arg: str,
                                                           code: int, says: str) -> None:
    done = world.run("show", arg, cwd=world.repo)
    err = done.stderr.decode()
    assert done.returncode == code and says in err and "Traceback" not in err, err
    if code == 2 and arg == "s-":
        assert [ln.split()[0] for ln in err.splitlines()[1:]] == [history[k] for k in ("open", "codex", "claude")]
    assert not (world.repo / ".git/index.lock").exists()


def test_a_commit_of_another_repository_is_not_this_ones(world: World, tmp_path: Path, history: dict[str, str]
                                                         ) -> None:
    other = tmp_path / "other"
    other.mkdir()
    git(other, "init", "-q", "-b", "main")
    git(other, "commit", "-q", "--allow-empty", "-m", "elsewhere")
    foreign = git(other, "rev-parse", "HEAD")
    done = world.run("show", foreign, cwd=world.repo)
    assert done.returncode == 12 and b"it is not a commit of this repository" in done.stderr


def test_records_of_an_older_writer_are_shown_for_what_they_say(world: World) -> None:
    """A REFERENCE 3.3 record (no provider, no end reason, created_at and task lists) and a legacy prompt."""
    sessions = world.repo / ".ai/repo/sessions"
    (sessions / "20251009T091803Z--s-20251009091659-3ee5--main--eb0609b--73ea739f7d4ff750.md").write_text(
        "---\nschema: session/v1\nkind: session\ncreated_at: \"2025-10-09T09:18:03Z\"\ntask_id: none\n"
        "profile: none\nrepository_id: \"local:x\"\nworktree_id: \"3adef4010bd6fa7e\"\nbranch: main\n"
        "head: eb0609b\nworking_tree: clean\nchanged_files: []\nsession_id: s-20251009091659-3ee5\n"
        "started_at: \"2025-10-09T09:16:59Z\"\nclosed_at: \"2025-10-09T09:18:03Z\"\noutcome: interrupted\n"
        "title: \"Session s-20251009091659-3ee5 on main\"\nstart_head: eb0609a\nstart_working_tree: clean\n"
        "commits: []\ntasks: []\n---\n")
    legacy = {"schema": "majordomus.prompt/v1", "started_at": "2025-10-09T09:17:00Z", "provider": "claude-code",
              "session": "old-ps", "episode": "s-20251009091659-3ee5", "episode_link": "ledger",
              "text": "an old prompt about the flamingo migration", "repository": "x", "model": "m"}
    archive = world.repo / ".ai/local/prompts"
    path = archive / "20251009091700-an-old-prompt.json"
    path.write_text(json.dumps(legacy))
    path.chmod(0o600)
    row = world.json("episodes")["episodes"][0]
    assert row["id"] == "s-20251009091659-3ee5" and row["provider"] is None and row["prompts"] == 1
    assert world.text("episodes").split()[:3] == ["s-20251009091659-3ee5", "-", "interrupted"]
    out = world.text("show", "s-2025")
    assert "written by an older writer" in out and "flamingo" in out
    assert "declares no command that resumes" in out  # no provider recorded: no command is guessed
    assert "the record" in out  # heads not in this clone: the record's own (empty) list
    assert world.json("search", "flamingo")["results"][0]["episode"] == "s-20251009091659-3ee5"


# -- 3. search -------------------------------------------------------------------------------------------------
def test_search_ranks_and_highlights_with_the_episode_time_and_link(world: World, history: dict[str, str]) -> None:
    out = world.text("search", "tokenizer").splitlines()
    assert len(out) == 4 and all(ln.startswith(f"{history['claude']} interrupted  20") for ln in out[0::2])
    assert "prompt open" in out[0] and "**tokenizer**" in out[1]
    data = world.json("search", "tokenizer")
    assert data["schema"] == "majordomus.search/v1" and data["count"] == 2
    first = data["results"][0]
    assert set(first) == {"kind", "record", "episode", "episode_state", "at", "provider", "branch", "episode_link",
                          "pruned", "rank", "snippet", "episode_usage"}
    assert first["episode_link"] == "open" and first["kind"] == "prompt" and "**tokenizer**" in first["snippet"]
    ranks = [r["rank"] for r in data["results"]]
    assert ranks == sorted(ranks)
    # the prompt that says the word twice ranks above the one that says it once
    world.prompt("claude-2", "tokenizer tokenizer tokenizer: the tokenizer is all this prompt is about")
    assert world.json("search", "tokenizer")["results"][0]["episode"] == history["open"]


def test_search_over_titles_branches_and_changed_files(world: World) -> None:
    git(world.repo, "checkout", "-q", "-b", "feature-zebra")
    sid = world.start("zebra")
    (world.repo / "stripes.txt").write_text("uncommitted\n")
    git(world.repo, "add", "stripes.txt")
    world.end("zebra", "logout")
    for query in ("zebra", "stripes", sid.split("-")[-1]):
        results = world.json("search", query)["results"]
        assert [(r["kind"], r["episode"]) for r in results] == [("episode", sid)], query


def test_search_filters_as_episodes_does(world: World, history: dict[str, str]) -> None:
    def episodes(*args: str) -> list[str]:
        return [r["episode"] for r in world.json("search", *args)["results"]]

    assert episodes("ledger") == [history["codex"]]
    assert episodes("ledger", "--provider", "claude-code") == []
    said = world.text("search", "ledger", "--provider", "claude-code")
    assert said == "no match for 'ledger' passes these filters (1 match(es) without them)\n"
    assert episodes("tokenizer", "--outcome", "closed") == []
    assert episodes("tokenizer", "-n", "1") == [history["claude"]]
    assert episodes("tokenizer", "--since", "2999-01-01") == [] and episodes("tokenizer", "--open") == []
    world.prompt("claude-2", "the tokenizer again, in the open episode")
    assert episodes("tokenizer", "--open") == [history["open"]]


@pytest.mark.parametrize("query", ["api-key", '"unterminated', "foo AND", "(x", "*", "zz:x"])
def test_a_query_fts5_cannot_parse_says_what_to_quote(world: World, history: dict[str, str], query: str) -> None:
    done = world.run("search", query, cwd=world.repo)
    err = done.stderr.decode()
    assert done.returncode == 2 and "Traceback" not in err, err
    assert "cannot parse the query" in err and "must be inside double quotes" in err
    assert err.count("\n") == 1


def test_the_index_is_private_untracked_derived_and_catches_up(world: World, history: dict[str, str]) -> None:
    assert world.json("search", "tokenizer")["count"] == 2
    index = world.repo / INDEX
    assert index.stat().st_mode & 0o777 == 0o600
    assert git(world.repo, "status", "--porcelain", "--ignored", "--", ".ai/local") == "!! .ai/local/"
    assert git(world.repo, "ls-files", ".ai/local") == ""
    world.prompt("claude-2", "a brand new word: quokka")
    assert world.json("search", "quokka")["results"][0]["episode"] == history["open"]  # caught up
    index.unlink()
    done = world.ok("--json", "search", "quokka")
    assert done.stderr == b"" and json.loads(done.stdout)["count"] == 1  # deleted: rebuilt, nothing lost
    assert world.json("episodes")["episodes"][0]["prompts"] == 1


def test_a_reconciled_link_and_a_pruned_body_reach_the_index(world: World) -> None:
    world.prompt("nobody", "an orphan asking about the walrus")
    hit = world.json("search", "walrus")["results"][0]
    assert hit["episode"] is None and hit["episode_link"] == "orphan"
    assert "no episode (orphan)" in world.text("search", "walrus")
    policy = world.repo / ".ai/repo/policy.yaml"
    policy.write_text(policy.read_text().replace("retention_max_bytes: 52428800", "retention_max_bytes: 1"))
    world.ok("capture", "prune")
    assert world.json("search", "walrus")["count"] == 0  # the body is gone, so it cannot be found by it
    tomb = world.json("search", "pruned retention")["results"]
    assert [r["pruned"] for r in tomb] == [True] and "**pruned**" in tomb[0]["snippet"]


@pytest.mark.parametrize("content", [b"this is not a database at all\n" * 40, "foreign", "old-schema"])
def test_a_corrupt_or_foreign_index_is_rebuilt_with_a_sentence(world: World, history: dict[str, str],
                                                                content: bytes | str) -> None:
    index = world.repo / INDEX
    world.ok("search", "tokenizer")
    index.unlink()
    if isinstance(content, bytes):
        index.write_bytes(content)
        said = "is not a SQLite database"
    else:
        conn = sqlite3.connect(index)
        if content == "foreign":
            conn.execute("CREATE TABLE photos(id INTEGER PRIMARY KEY, path TEXT)")
            said = "was written by another tool"
        else:
            conn.executescript("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT);"
                               "INSERT INTO meta VALUES ('schema', 'majordomus-search/0');"
                               "CREATE TABLE docs(id INTEGER); CREATE TABLE doc_fts(id INTEGER);")
            said = "has schema 'majordomus-search/0'"
        conn.commit()
        conn.close()
    done = world.ok("--json", "search", "tokenizer")
    err = done.stderr.decode()
    assert err.startswith(f"majordomus: the search index {INDEX} {said}") and "rebuilt it" in err, err
    assert err.count("\n") == 1 and json.loads(done.stdout)["count"] == 2
    assert index.stat().st_mode & 0o777 == 0o600
    assert world.ok("search", "tokenizer").stderr == b""  # once rebuilt, quiet


def test_a_torn_index_is_rebuilt_and_a_symlinked_one_refused(world: World, history: dict[str, str],
                                                              tmp_path: Path) -> None:
    world.ok("search", "tokenizer")
    index = world.repo / INDEX
    raw = index.read_bytes()
    index.write_bytes(raw[:4096] + b"\xff" * (len(raw) - 4096))  # the header survives, every page after it torn
    done = world.run("--json", "search", "tokenizer", cwd=world.repo)
    assert done.returncode == 0 and json.loads(done.stdout)["count"] == 2, done.stderr
    assert b"rebuilt it" in done.stderr
    index.unlink()
    outside = tmp_path / "elsewhere.sqlite3"
    index.symlink_to(outside)
    refused = world.run("search", "tokenizer", cwd=world.repo)
    assert refused.returncode == 15 and b"symbolic link" in refused.stderr and not outside.exists()


def test_two_searches_at_once_agree(world: World, history: dict[str, str]) -> None:
    procs = [subprocess.Popen([str(MAJORDOMUS), "--json", "search", "tokenizer"], cwd=world.repo,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(4)]
    outs = [p.communicate(timeout=60) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e for _, e in outs]
    assert {json.loads(o)["count"] for o, _ in outs} == {2}


def test_a_record_this_writer_cannot_read_is_skipped_not_fatal(world: World, history: dict[str, str]) -> None:
    archive = world.repo / ".ai/local/prompts"
    for name, body in (("20261201000000-torn.json", b'{"schema": "majordomus.capture/v1", "text": "tokeni'),
                       ("20261201000001-foreign.json", b'{"schema": "other/v9", "text": "tokenizer"}')):
        (archive / name).write_bytes(body)
        (archive / name).chmod(0o600)
    (archive / "20261201000002-link.json").symlink_to(world.repo / "README.md")
    data = world.json("search", "tokenizer")
    assert data["count"] == 2 and {r["episode"] for r in data["results"]} == {history["claude"]}
    assert world.json("episodes")["episodes"][2]["prompts"] == 2
    assert world.json("search", "repository")["count"] == 0  # the link (to README.md) is never followed


def test_a_record_naming_no_known_outcome_is_shown_unknown_not_guessed(world: World) -> None:
    sid = world.start("odd")
    world.end("odd", "logout")
    (path,) = (world.repo / ".ai/repo/sessions").glob(f"*--{sid}--*.md")
    path.write_text(path.read_text().replace('outcome: "closed"', 'outcome: "exploded"'))
    (row,) = world.json("episodes")["episodes"]
    assert (row["state"], row["outcome"]) == ("unknown", None)
    assert world.json("show", sid)["resume"] is None
