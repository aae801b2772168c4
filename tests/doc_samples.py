"""The real output in the command pages (docs/episodes-command.md, show-command.md, search-command.md,
export-command.md): one fixed history drawn by the real hook commands, the documented command lines run on it.

    .venv/bin/python tests/doc_samples.py --write     # regenerate every block marked <!-- sample: NAME -->

A page marks each generated block with `<!-- sample: NAME -->` on the line before its fence; the block is
replaced whole. tests/history/test_doc_samples.py runs the same history again and fails when a page's sample
differs from what the code prints now, once ids, times, hashes and durations (which differ on every run) are
masked.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

BIN = Path(sys.executable).parent
MAJORDOMUS = str(BIN / "majordomus")
MAJORDOMUS_MCP = str(BIN / "majordomus-mcp")
DOCS = Path(__file__).resolve().parents[1] / "docs"
PAGES = ("episodes-command.md", "show-command.md", "search-command.md", "export-command.md")
MARK = re.compile(r"<!-- sample: ([a-z0-9-]+) -->\n(`{3,})\n.*?\n\2\n", re.S)
CLAUDE, CODEX, OPEN = ("7f3c9a12-4b1e-4c55-9d0e-2a6b8c1d0e33", "019ae1c4-5d3b-7c21-a0f4-6e2d8b9c1a57",
                       "c0ffee00-1111-2222-3333-444455556666")
KEY = "sk-ant-api03-" + "Qx7vR2mN8pL4kT6wZ1yB3cD5fG9hJ0aS" * 2 + "-AbCdEfGh"


class History:
    """A repository, the hooks a client runs in it, and the environment every command sees."""

    def __init__(self, root: Path) -> None:
        self.repo = root / "tokenizer-demo"
        home = root / "home"
        home.mkdir()
        self.env = {**os.environ, "HOME": str(home), "NO_COLOR": "1", "GIT_CONFIG_NOSYSTEM": "1",
                    "GIT_AUTHOR_NAME": "Dana", "GIT_AUTHOR_EMAIL": "dana@example.invalid",
                    "GIT_COMMITTER_NAME": "Dana", "GIT_COMMITTER_EMAIL": "dana@example.invalid",
                    "XDG_CONFIG_HOME": str(home / ".config")}
        self.ids: dict[str, str] = {}

    def run(self, *argv: str, payload: dict[str, object] | None = None, check: bool = True
            ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(list(argv), cwd=self.repo, env=self.env, capture_output=True, text=True,
                              input=json.dumps(payload) if payload is not None else None, timeout=120)
        if check and done.returncode != 0:
            raise AssertionError(f"{argv}: {done.stderr}")
        return done

    def git(self, *args: str) -> str:
        return self.run("git", *args).stdout.strip()

    def hook(self, provider: str, event: str, payload: dict[str, object]) -> str:
        return self.run(MAJORDOMUS, "capture", "session", "--provider", provider, "--event", event,
                        payload=payload).stderr

    def start(self, provider: str, session: str) -> str:
        time.sleep(1.05)  # each episode its own second, so a 14-digit prefix names one
        line = self.hook(provider, "start", {"session_id": session, "source": "startup"})
        return line.split()[1]

    def prompt(self, provider: str, session: str, text: str) -> None:
        key = {"claude-code": "prompt_id", "codex": "turn_id"}[provider]
        self.run(MAJORDOMUS, "capture", "prompt", "--provider", provider,
                 payload={"session_id": session, key: f"id-{len(text)}-{text[:12]}", "prompt": text})

    def claude_transcript(self, session: str, answers: list[tuple[str, int, int, int, int]]) -> None:
        """What Claude Code writes of its model's answers, stamped now: (model, input, output, cache read, cache
        write) each, at ~/.claude/projects/<project>/<session>.jsonl (docs/usage.md)."""
        from datetime import UTC, datetime

        folder = Path(self.env["HOME"]) / ".claude" / "projects" / str(self.repo).replace("/", "-")
        folder.mkdir(parents=True, exist_ok=True)
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")
        with (folder / f"{session}.jsonl").open("a") as out:
            for n, (model, inp, output, read, write) in enumerate(answers):
                usage = {"input_tokens": inp, "output_tokens": output, "cache_read_input_tokens": read,
                         "cache_creation_input_tokens": write}
                out.write(json.dumps({"type": "assistant", "sessionId": session, "timestamp": now,
                                      "requestId": f"req_{n}", "message": {"id": f"msg_{n}", "model": model,
                                                                          "role": "assistant", "usage": usage}})
                          + "\n")

    def commit(self, path: str, text: str, subject: str) -> None:
        (self.repo / path).parent.mkdir(parents=True, exist_ok=True)
        (self.repo / path).write_text(text)
        self.git("add", path)
        self.git("commit", "-q", "-m", subject)

    def build(self) -> None:
        """A Claude Code sitting killed mid-answer, a finished `codex exec` on a branch, an MCP client that went
        away, and a Claude Code sitting still open."""
        self.repo.mkdir()
        self.git("init", "-q", "-b", "main")
        self.run(MAJORDOMUS, "init")
        self.git("add", "-A")
        self.git("commit", "-q", "-m", "majordomus layer")
        self.commit("src/tokenizer.py", "def tokens(text):\n    return text.split()\n", "the tokenizer")
        self.ids["claude"] = self.start("claude-code", CLAUDE)
        self.prompt("claude-code", CLAUDE, "The tokenizer drops the last token when the input ends in a comment; "
                                           "find out why and fix it")
        self.commit("src/tokenizer.py", "def tokens(text):\n    return text.split('#')[0].split()\n\n\n",
                    "tokenizer: keep the last token before a trailing comment")
        time.sleep(1.05)
        self.prompt("claude-code", CLAUDE, f"Add a regression test; the CI key is ANTHROPIC_API_KEY={KEY}")
        self.commit("tests/test_tokenizer.py", "def test_comment():\n    assert True\n",
                    "test the trailing comment case")
        self.claude_transcript(CLAUDE, [("claude-sonnet-4-5-20250929", 3, 412, 18_220, 2_310),
                                        ("claude-sonnet-4-5-20250929", 5, 1_106, 20_530, 1_270)])
        self.hook("claude-code", "end", {"session_id": CLAUDE, "reason": "other"})  # killed mid-answer
        self.git("checkout", "-q", "-b", "docs-ledger")
        self.ids["codex"] = self.start("codex", CODEX)
        self.prompt("codex", CODEX, "Document how the ledger rotates, in docs/ledger.md")
        self.commit("docs/ledger.md", "# The ledger\n\nIt rotates at 1 MiB.\n", "document ledger rotation")
        self.hook("codex", "turn", {"session_id": CODEX, "turn_id": "turn-1"})
        self.hook("codex", "end", {"session_id": CODEX, "reason": "other"})
        self.git("checkout", "-q", "main")
        time.sleep(1.05)
        frames = [{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "an-ide", "version": "1"}}},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                "name": "majordomus_session_attach", "arguments": {"external_id": "ide-thread-42"}}}]
        subprocess.run([MAJORDOMUS_MCP, "--http-port", "0"], cwd=self.repo, env=self.env, capture_output=True,
                       input="".join(json.dumps(f) + "\n" for f in frames), text=True, timeout=60, check=True)
        self.ids["open"] = self.start("claude-code", OPEN)
        self.prompt("claude-code", OPEN, "Now make the tokenizer handle unicode identifiers")

    def ambiguous(self) -> None:
        """A Codex sitting beside the open Claude Code one, and a commit made while both were open."""
        self.ids["codex2"] = self.start("codex", "019ae1c4-0000-7c21-a0f4-000000000002")
        self.commit("src/unicode.py", "IDENT = r'\\w+'\n", "made while two agents were open")
        self.hook("codex", "end", {"session_id": "019ae1c4-0000-7c21-a0f4-000000000002", "reason": "other"})

    def foreign_index(self) -> None:
        """Another tool's SQLite file where the search index lives."""
        import sqlite3

        index = self.repo / ".ai/local/state/search.sqlite3"
        index.unlink()
        conn = sqlite3.connect(index)
        conn.execute("CREATE TABLE photos(id INTEGER PRIMARY KEY, path TEXT)")
        conn.commit()
        conn.close()

    def sample(self, lines: list[str]) -> str:
        """Each command line run for real (`$ echo $?` after one that failed), its stdout and stderr."""
        out: list[str] = []
        for line in lines:
            argv = [a.format(**self.ids, **{f"{k}_prefix": v[:16] for k, v in self.ids.items()})
                    for a in shlex_split(line)]
            # one pipe for both, as a terminal shows them (a note on stderr comes before the results)
            done = subprocess.run([MAJORDOMUS, *argv[1:]], cwd=self.repo, env=self.env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, timeout=120)
            out.append("$ " + " ".join(shell_quote(a) for a in argv))
            text = done.stdout
            out += text.rstrip("\n").splitlines() if text.strip() else []
            if done.returncode != 0:
                out += ["$ echo $?", str(done.returncode)]
            out.append("")
        return "\n".join(out).rstrip("\n")


def shlex_split(line: str) -> list[str]:
    import shlex

    return shlex.split(line)


def shell_quote(arg: str) -> str:
    import shlex

    return arg if re.fullmatch(r"[\w@%+=:,./~^-]+", arg) else shlex.quote(arg)


# NAME -> the command lines of that block ({claude}, {codex}, {open}, {codex2}: the episode ids of the history;
# {claude_prefix} and the like: the first 16 characters of one, `s-` and its second)
SAMPLES: dict[str, list[str]] = {
    "episodes": ["majordomus episodes", "majordomus episodes --outcome interrupted"],
    "episodes-json": ["majordomus --json episodes -n 1"],
    "show-episode": ["majordomus show {claude_prefix}"],
    "show-commit": ["majordomus show HEAD"],
    "show-outside": ["majordomus show HEAD~2"],
    "show-bad": ["majordomus show s-2026", "majordomus show zz99"],
    "search": ["majordomus search tokenizer", "majordomus search 'rotates OR unicode'"],
    "search-bad": ["majordomus search docs-ledger", "majordomus search '\"docs-ledger\"'"],
    "search-json": ["majordomus --json search -n 1 tokenizer"],
    "export-md": ["majordomus export {codex}"],
    "export-file": ["majordomus export --format html -o episodes.html",
                    "majordomus export --format json --with-prompts -o episodes.json {claude_prefix}"],
}
AMBIGUOUS: dict[str, list[str]] = {"show-ambiguous": ["majordomus show HEAD"]}
FOREIGN: dict[str, list[str]] = {"search-foreign": ["majordomus search unicode -n 1"]}


def generate(root: Path) -> dict[str, str]:
    """Every sample, from one history built in `root`."""
    h = History(root)
    h.build()
    found = {name: h.sample(lines) for name, lines in SAMPLES.items()}
    h.ambiguous()
    found.update({name: h.sample(lines) for name, lines in AMBIGUOUS.items()})
    h.foreign_index()
    found.update({name: h.sample(lines) for name, lines in FOREIGN.items()})
    return found


def fill(page: str, samples: dict[str, str]) -> str:
    def block(m: re.Match[str]) -> str:
        name, fence = m.group(1), m.group(2)
        if name not in samples:
            raise KeyError(f"no sample named {name!r}")
        return f"<!-- sample: {name} -->\n{fence}\n{samples[name]}\n{fence}\n"

    return MARK.sub(block, page)


_MASKS: list[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]]] = [
    (re.compile(r"s-\d{14}(-[0-9a-f]{4})?"), "<episode>"),
    (re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2})?Z?"), "<time>"),
    (re.compile(r"\d{8}T?\d{6}Z?"), "<stamp>"),
    (re.compile(r"\b[0-9a-f]{7,64}\b"), "<hex>"),
    (re.compile(r"\b\d+(s|m\d{2}s|h\d{2}m)\b\+?"), "<duration>"),
    (re.compile(r'"(duration_seconds|rank)": -?[0-9.]+'), r'"\1": <n>'),
    (re.compile(r"[ \t]+"), " "),
]


def masked(text: str) -> str:
    """What stays the same from one run to the next: the ids, times, hashes and durations masked, and the
    columns' padding (which follows the durations' widths) collapsed."""
    for pattern, repl in _MASKS:
        text = pattern.sub(repl, text)  # type: ignore[arg-type]
    return text


def main(argv: list[str]) -> int:
    if argv != ["--write"]:
        print(__doc__, file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="mj-doc-samples-") as tmp:
        samples = generate(Path(tmp))
    for name in PAGES:
        path = DOCS / name
        path.write_text(fill(path.read_text(encoding="utf-8"), samples), encoding="utf-8")
        print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
