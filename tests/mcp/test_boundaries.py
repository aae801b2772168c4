"""Starlette and uvicorn live in mcp/http.py only; a bridging or standalone process never loads them."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import majordomus

SRC = Path(majordomus.__file__).parent


def test_only_mcp_http_imports_starlette_or_uvicorn() -> None:
    pattern = re.compile(r"^\s*(from|import)\s+(starlette|uvicorn|anyio)\b", re.M)
    offenders = [str(p.relative_to(SRC)) for p in SRC.rglob("*.py") if pattern.search(p.read_text())]
    assert offenders == ["mcp/http.py"]


def test_the_stdio_side_of_the_server_loads_no_web_framework() -> None:
    probe = ("import json, sys; import majordomus.mcp.server, majordomus.mcp.runtime, majordomus.episodes.board, "
             "majordomus.capabilities.registry, majordomus.capabilities.catalogue; "
             "majordomus.capabilities.catalogue.default_registry(); "
             "print(json.dumps(sorted(sys.modules)))")
    loaded = json.loads(subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                                       check=True).stdout)
    heavy = sorted(m for m in loaded if m.split(".")[0] in ("starlette", "uvicorn", "anyio", "pydantic", "mcp",
                                                            "httpx", "yaml"))
    assert heavy == []
