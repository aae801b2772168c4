"""How each real client is set up and run offline, as `../shared/spec/REAL-CLIENTS.md` says a person does it.

A driver knows one client's isolated HOME (credentials, onboarding, trust), its environment pointing at the
fake model API, its command lines for a headless run, a resumed run and an MCP run, and the tool calls its
model must make to reach `majordomus_session_attach`. Nothing here knows what majordomus should record.
"""

from __future__ import annotations

import json
import re
import select
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from real_clients.fake_api import Call

ATTACH = "majordomus_session_attach"


@dataclass(frozen=True)
class Driver:
    provider: str  # the majordomus provider name
    command: str  # the executable under node_modules/.bin
    hook_file: str  # what `capture install` writes, relative to the repository

    def prepare_home(self, home: Path, repo: Path, api_url: str) -> None:
        raise NotImplementedError

    def env(self, home: Path, api_url: str) -> dict[str, str]:
        raise NotImplementedError

    def headless(self, prompt: str) -> list[str]:
        raise NotImplementedError

    def resume(self, prompt: str, stdout: str, stderr: str) -> list[str]:
        """The resumed run, from what the first run printed."""
        raise NotImplementedError

    def with_mcp(self, prompt: str) -> list[str]:
        """A headless run whose model may call the project's MCP tools."""
        raise NotImplementedError

    def attach_calls(self, external_id: str) -> tuple[Call, ...]:
        raise NotImplementedError

    def review(self, executable: str, repo: Path, env: dict[str, str]) -> None:
        """Approve what the client asks a person to approve once the project is wired (Codex: its hooks)."""

    paces = False  # whether runs put an order on the client's hooks (`paced`)
    local_hook_file: ClassVar[str | None] = None  # the hook file when it is per-person, out of git (a clone lacks it)

    def paced(self, hook_file: bytes) -> bytes:
        """The hook file with the client's hooks put in the order the scenarios rely on."""
        return hook_file


class ClaudeCode(Driver):
    local_hook_file = ".claude/settings.local.json"
    KEY = "sk-ant-api03-fake0000000000000000000000000000000000000000000000000000000000000000"

    def prepare_home(self, home: Path, repo: Path, api_url: str) -> None:
        # onboarding done, the API key approved by its last 20 characters, the project's trust dialog accepted
        doc = {"hasCompletedOnboarding": True,
               "customApiKeyResponses": {"approved": [self.KEY[-20:]], "rejected": []},
               "projects": {str(repo): {"hasTrustDialogAccepted": True}}}
        (home / ".claude.json").write_text(json.dumps(doc, indent=2))

    def env(self, home: Path, api_url: str) -> dict[str, str]:
        return {"ANTHROPIC_BASE_URL": api_url, "ANTHROPIC_API_KEY": self.KEY,
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1",
                "DISABLE_TELEMETRY": "1"}

    def headless(self, prompt: str) -> list[str]:
        return [self.command, "-p", "--output-format", "json", "--", prompt]

    def resume(self, prompt: str, stdout: str, stderr: str) -> list[str]:
        session = json.loads(stdout)["session_id"]
        return [self.command, "-p", "--output-format", "json", "--resume", session, "--", prompt]

    def with_mcp(self, prompt: str) -> list[str]:
        return [self.command, "-p", "--output-format", "json", "--allowedTools", f"mcp__majordomus__{ATTACH}",
                "--", prompt]

    def attach_calls(self, external_id: str) -> tuple[Call, ...]:
        name = f"mcp__majordomus__{ATTACH}"
        # Claude Code defers MCP tools: the model loads the schema through ToolSearch, then calls the tool
        return (Call("ToolSearch", {"query": f"select:{name}", "max_results": 1}),
                Call(name, {"external_id": external_id}))


class Codex(Driver):
    KEY_VAR = "FAKE_MODEL_API_KEY"

    def prepare_home(self, home: Path, repo: Path, api_url: str) -> None:
        codex_home = home / ".codex"
        codex_home.mkdir(parents=True, exist_ok=True)
        (codex_home / "config.toml").write_text(
            'model = "gpt-5"\nmodel_provider = "fake"\ncheck_for_update_on_startup = false\n\n'
            f'[model_providers.fake]\nname = "fake"\nbase_url = "{api_url}/v1"\nenv_key = "{self.KEY_VAR}"\n'
            f'wire_api = "responses"\n\n[projects.{json.dumps(str(repo))}]\ntrust_level = "trusted"\n')

    def env(self, home: Path, api_url: str) -> dict[str, str]:
        return {"CODEX_HOME": str(home / ".codex"), self.KEY_VAR: "sk-fake-codex-key"}

    def headless(self, prompt: str) -> list[str]:
        return [self.command, "exec", prompt]

    def resume(self, prompt: str, stdout: str, stderr: str) -> list[str]:
        return [self.command, "exec", "resume", "--last", prompt]

    def with_mcp(self, prompt: str) -> list[str]:
        return self.headless(prompt)

    def attach_calls(self, external_id: str) -> tuple[Call, ...]:
        return (Call(ATTACH, {"external_id": external_id}, namespace="mcp__majordomus"),)

    def review(self, executable: str, repo: Path, env: dict[str, str]) -> None:
        self.review_hooks(executable, repo, env)

    def review_hooks(self, executable: str, repo: Path, env: dict[str, str], timeout: float = 60) -> list[str]:
        """What a person does in the TUI's "Hooks need review": trust each project hook as Codex hashes it.

        The hash is the client's own: `codex app-server` lists every hook with its `key` (the absolute path of
        .codex/hooks.json, the event and the handler's place) and `currentHash`, and the approval is the
        `[hooks.state."<key>"] trusted_hash` entry in CODEX_HOME/config.toml. Returns the keys trusted.
        (The alternative, `--dangerously-bypass-hook-trust`, would skip the very check a person meets.)
        """
        try:
            hooks = app_server_hooks(executable, repo, env, timeout)
        except TimeoutError:
            # under load, one `codex app-server` of a CI run never answered hooks/list; a person opens Codex again
            hooks = app_server_hooks(executable, repo, env, timeout)
        if not hooks:
            raise RuntimeError(f"codex app-server lists no hook for {repo}: nothing to review")
        config = Path(env["CODEX_HOME"]) / "config.toml"
        text = config.read_text()
        for hook in hooks:
            text += f'\n[hooks.state.{json.dumps(hook["key"])}]\ntrusted_hash = {json.dumps(hook["currentHash"])}\n'
        config.write_text(text)
        return [str(hook["key"]) for hook in hooks]


def app_server_hooks(executable: str, repo: Path, env: dict[str, str], timeout: float) -> list[dict[str, Any]]:
    """`hooks/list` over `codex app-server`'s JSON-RPC lines: the project's hooks as Codex sees them."""
    process = subprocess.Popen([executable, "app-server"], cwd=repo, env=env, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    deadline = time.monotonic() + timeout

    def send(message: dict[str, Any]) -> None:
        if process.stdin is None:
            raise RuntimeError("codex app-server has no stdin")
        process.stdin.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
        process.stdin.flush()

    def answer(request_id: int) -> dict[str, Any]:
        if process.stdout is None:
            raise RuntimeError("codex app-server has no stdout")
        while time.monotonic() < deadline:
            ready, _, _ = select.select([process.stdout], [], [], 0.5)
            if not ready:
                continue
            line = process.stdout.readline()
            if not line:
                break
            message = json.loads(line)
            if message.get("id") == request_id:
                if "error" in message:
                    raise RuntimeError(f"codex app-server refused request {request_id}: {message['error']}")
                return dict(message["result"])
        raise TimeoutError(f"codex app-server gave no answer to request {request_id} within {timeout:.0f} s")

    try:
        send({"id": 1, "method": "initialize", "params": {"clientInfo": {"name": "majordomus-tests", "version": "1"}}})
        answer(1)
        send({"method": "initialized", "params": {}})
        send({"id": 2, "method": "hooks/list", "params": {"cwds": [str(repo)]}})
        listed = answer(2)
    finally:
        process.kill()
        process.wait(timeout=30)
    return [hook for entry in listed.get("data", []) for hook in entry.get("hooks", [])]


class Gemini(Driver):
    def prepare_home(self, home: Path, repo: Path, api_url: str) -> None:
        gemini = home / ".gemini"
        gemini.mkdir(parents=True, exist_ok=True)
        (gemini / "settings.json").write_text(json.dumps(
            {"security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": True}}}))
        self.trust_folder(home, repo)

    def trust_folder(self, home: Path, repo: Path) -> None:
        """The person's answer to Gemini's folder-trust question, as Gemini stores it."""
        (home / ".gemini" / "trustedFolders.json").write_text(json.dumps({str(repo): "TRUST_FOLDER"}))

    def env(self, home: Path, api_url: str) -> dict[str, str]:
        return {"GOOGLE_GEMINI_BASE_URL": api_url, "GEMINI_API_KEY": "fake-gemini-key"}

    def headless(self, prompt: str) -> list[str]:
        return [self.command, "-p", prompt]

    def resume(self, prompt: str, stdout: str, stderr: str) -> list[str]:
        return [self.command, "-p", prompt, "--resume", "latest"]

    def with_mcp(self, prompt: str) -> list[str]:
        return [self.command, "-p", prompt, "--approval-mode", "yolo"]

    def attach_calls(self, external_id: str) -> tuple[Call, ...]:
        return (Call(f"mcp_majordomus_{ATTACH}", {"external_id": external_id}),)


COPILOT_RESUME = re.compile(r"copilot --resume=([0-9a-f-]+)")
# Wait (at most 9 s, inside the hook's 10 s) until the SessionStart hook has written an open episode, then
# run majordomus's prompt hook.
PROMPT_AFTER_START = ("for _ in $(seq 180); do ls .ai/local/state/sessions-open/*.yaml >/dev/null 2>&1 && break; "
                      "sleep 0.05; done; ")


class Copilot(Driver):
    def prepare_home(self, home: Path, repo: Path, api_url: str) -> None:
        copilot = home / ".copilot"
        copilot.mkdir(parents=True, exist_ok=True)
        # Copilot 1.0.102 reads trustedFolders from config.json; in settings.json it logs "Ignoring unknown
        # top-level key(s) ... trustedFolders" and loads no repository hooks in -p.
        (copilot / "config.json").write_text(json.dumps({"trustedFolders": [str(repo)]}))

    paces = True

    def paced(self, hook_file: bytes) -> bytes:
        """Copilot starts SessionStart and UserPromptSubmit at the same moment, so a sitting
        that is not about that race would link its prompt or not by luck. Its prompt hook waits for the start
        hook's open file, the order the other three clients keep by themselves; test_copilot_race.py holds the
        race, and the wiring install wrote is put back after every run, before anything reads status."""
        doc = json.loads(hook_file)
        for handler in doc["hooks"]["UserPromptSubmit"]:
            if "majordomus" in handler["bash"]:
                handler["bash"] = PROMPT_AFTER_START + handler["bash"]
        return json.dumps(doc, indent=2).encode()

    def env(self, home: Path, api_url: str) -> dict[str, str]:
        return {"COPILOT_PROVIDER_BASE_URL": f"{api_url}/v1", "COPILOT_PROVIDER_TYPE": "openai",
                "COPILOT_PROVIDER_API_KEY": "fake-copilot-key", "COPILOT_MODEL": "fake-model",
                "COPILOT_OFFLINE": "true", "COPILOT_AUTO_UPDATE": "false"}

    def headless(self, prompt: str) -> list[str]:
        return [self.command, "-p", prompt]

    def resume(self, prompt: str, stdout: str, stderr: str) -> list[str]:
        found = COPILOT_RESUME.search(stderr) or COPILOT_RESUME.search(stdout)
        if not found:
            raise RuntimeError(f"copilot printed no `copilot --resume=<id>` line: {stderr[-400:]!r}")
        return [self.command, "-p", prompt, f"--resume={found.group(1)}"]

    def with_mcp(self, prompt: str) -> list[str]:
        return [self.command, "-p", prompt, "--allow-all-tools"]

    def attach_calls(self, external_id: str) -> tuple[Call, ...]:
        return (Call(f"majordomus-{ATTACH}", {"external_id": external_id}),)


QWEN_RESULT = re.compile(r'"session_id"\s*:\s*"([0-9a-f-]+)"')


class Qwen(Driver):
    """Qwen Code (npm @qwen-code/qwen-code), a Gemini CLI fork speaking OpenAI chat completions: OPENAI_BASE_URL,
    OPENAI_API_KEY and OPENAI_MODEL point it at the fake API, and `security.auth.selectedType` says so in its
    settings (`~/.qwen/settings.json`); folder trust is off unless that file turns it on."""

    def prepare_home(self, home: Path, repo: Path, api_url: str) -> None:
        qwen = home / ".qwen"
        qwen.mkdir(parents=True, exist_ok=True)
        # no update check, no usage statistics: nothing leaves the machine but the requests to the fake API
        (qwen / "settings.json").write_text(json.dumps({"security": {"auth": {"selectedType": "openai"}},
                                                        "general": {"enableAutoUpdate": False},
                                                        "privacy": {"usageStatisticsEnabled": False}}))

    def env(self, home: Path, api_url: str) -> dict[str, str]:
        return {"OPENAI_BASE_URL": f"{api_url}/v1", "OPENAI_API_KEY": "sk-fake-qwen-key", "OPENAI_MODEL": "fake-model"}

    def headless(self, prompt: str) -> list[str]:
        # the positional prompt is its one-shot run (-p is deprecated); JSON output names the session
        return [self.command, "--output-format", "json", prompt]

    def resume(self, prompt: str, stdout: str, stderr: str) -> list[str]:
        found = QWEN_RESULT.search(stdout)
        if not found:
            raise RuntimeError(f"qwen printed no session_id in its JSON output: {stdout[-400:]!r}")
        return [self.command, "--output-format", "json", "--resume", found.group(1), prompt]

    def with_mcp(self, prompt: str) -> list[str]:
        return [self.command, "--output-format", "json", "--approval-mode", "yolo", prompt]

    def attach_calls(self, external_id: str) -> tuple[Call, ...]:
        return (Call(f"mcp__majordomus__{ATTACH}", {"external_id": external_id}),)


# Qwen Code's finished one-shot run fires no SessionEnd, so it has tests of its own (test_qwen.py), not the
# parametrised ones that hold every finished headless run closed
QWEN = Qwen("qwen-code", "qwen", ".qwen/settings.json")

DRIVERS: dict[str, Driver] = {
    "claude-code": ClaudeCode("claude-code", "claude", ".claude/settings.local.json"),
    "codex": Codex("codex", "codex", ".codex/hooks.json"),
    "gemini": Gemini("gemini", "gemini", ".gemini/settings.json"),
    "copilot": Copilot("copilot", "copilot", ".github/hooks/majordomus.json"),
}
CLIENTS = tuple(DRIVERS)
