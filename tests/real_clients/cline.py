"""The Cline CLI (npm `cline`), set up and run offline as a person does it.

What the pinned CLI does, read from its --help and its bundled @cline/core and observed offline:
- its model provider is kept in `~/.cline/data/settings/providers.json`, which `cline auth -p openai -k KEY
  -m MODEL -b URL` writes as an `openai-compatible` provider (only OpenAI-compatible providers take a base URL),
  so it talks OpenAI chat completions to the fake API;
- its MCP servers are read only from `~/.cline/data/settings/cline_mcp_settings.json` (`mcpServers`, as
  Claude's), never from the repository;
- `cline --json "task"` is its headless run (auto-approve on by default); `--id <session>` resumes, but only in
  the interactive terminal UI (it needs a TTY for stdin and stdout), which test_cline.py drives in tmux.

It is not in `drivers.DRIVERS`: Cline's sittings do not end the way the four others' do (a completed headless
run fires no end hook), so it has its own tests (test_cline.py) rather than joining the parametrised ones.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from real_clients.drivers import ATTACH, Driver
from real_clients.fake_api import Call

SETTINGS = ".cline/data/settings"
MODEL = "gpt-4o"
API_URL = "MAJORDOMUS_TEST_FAKE_API"  # how review() learns the fake API's address (the client ignores it)


class Cline(Driver):
    KEY = "sk-fake-cline-0000000000000000"

    def prepare_home(self, home: Path, repo: Path, api_url: str) -> None:
        (home / SETTINGS).mkdir(parents=True, exist_ok=True)

    def review(self, executable: str, repo: Path, env: dict[str, str]) -> None:
        """`cline auth`, as a person points the CLI at an OpenAI-compatible endpoint (a providers.json written by
        hand without its bookkeeping is ignored, and the CLI falls back to Cline's own cloud provider)."""
        argv = [executable, "auth", "-p", "openai", "-k", self.KEY, "-m", MODEL, "-b", f"{env[API_URL]}/v1"]
        done = subprocess.run(argv, cwd=repo, env=env, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0 or "openai-compatible" not in done.stdout:
            raise RuntimeError(f"cline auth did not configure the fake API: {done.stdout[-400:]} {done.stderr[-400:]}")

    def add_mcp_server(self, home: Path, command: str) -> None:
        """What a person adds by hand (install prints it): majordomus in Cline's own MCP settings file."""
        doc = {"mcpServers": {"majordomus": {"command": command, "args": []}}}
        (home / SETTINGS / "cline_mcp_settings.json").write_text(json.dumps(doc, indent=2))

    def env(self, home: Path, api_url: str) -> dict[str, str]:
        return {API_URL: api_url}

    def headless(self, prompt: str) -> list[str]:
        return [self.command, "--json", prompt]

    def resume(self, prompt: str, stdout: str, stderr: str) -> list[str]:
        raise NotImplementedError("cline --id opens the interactive terminal UI only")

    def with_mcp(self, prompt: str) -> list[str]:
        return [self.command, "--json", prompt]

    def attach_calls(self, external_id: str) -> tuple[Call, ...]:
        return (Call(f"majordomus__{ATTACH}", {"external_id": external_id}),)


CLINE = Cline("cline", "cline", ".clinerules/hooks")
