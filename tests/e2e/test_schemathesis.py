"""Schemathesis (every check) against the OpenAPI of a real shared server: with the owner's token, without it, with a
forged Host and with a forged Origin. Each exception it may report is in schemathesis_expected.yaml, with its reason."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import yaml

from mcp_support import McpProcess, auth, initialize

pytest.importorskip("schemathesis")
pytestmark = pytest.mark.slow
SCHEMATHESIS = Path(sys.executable).parent / "schemathesis"
EXPECTED = yaml.safe_load((Path(__file__).parent / "schemathesis_expected.yaml").read_text())
SECTION = re.compile(r"^_{3,} ([A-Z]+ \S+) _{3,}$")
CHECK = re.compile(r"^- (ST\d+) ")


def reported(output: str) -> set[tuple[str, str]]:
    """(operation, check code) of every failure in schemathesis's report."""
    found: set[tuple[str, str]] = set()
    operation = None
    for line in output.splitlines():
        if (section := SECTION.match(line)) is not None:
            operation = section.group(1)
        elif (check := CHECK.match(line)) is not None and operation is not None:
            found.add((operation, check.group(1)))
    return found


@pytest.mark.slow
def test_schemathesis_finds_only_the_explained_exceptions(initialised_repo: Path, tmp_path: Path) -> None:
    with McpProcess(initialised_repo, "--http-port", "0") as proc:
        url = proc.url()
        proc.request(initialize("owner"))
        owner = auth(initialised_repo)["Authorization"]
        schema = tmp_path / "openapi.json"
        schema.write_text(json.dumps(httpx.get(f"{url}/openapi.json", headers={"Authorization": owner},
                                               timeout=10).json()))
        modes = {"token": [f"Authorization: {owner}"], "none": [],
                 "forged-host": [f"Authorization: {owner}", "Host: evil.example"],
                 "forged-origin": [f"Authorization: {owner}", f"Origin: http://localhost:{url.rsplit(':', 1)[1]}1"]}
        problems = []
        for mode, headers in modes.items():
            done = subprocess.run([str(SCHEMATHESIS), "run", str(schema), "--url", url, "--checks", "all",
                                   "--max-examples", "20", "--generation-deterministic", "--no-color",
                                   *(arg for h in headers for arg in ("-H", h))],
                                  capture_output=True, text=True, timeout=600, cwd=tmp_path)
            found = reported(done.stdout)
            assert done.returncode in (0, 1), done.stdout + done.stderr
            expected = EXPECTED[mode] or []
            unexplained = {(op, code) for op, code in found
                           if not any(e["check"] == code and e["operation"] in ("*", op) for e in expected)}
            gone = [e for e in expected if not any(code == e["check"] and e["operation"] in ("*", op)
                                                   for op, code in found)]
            if unexplained or gone:
                problems.append(f"{mode}: unexplained {sorted(unexplained)}; no longer reported "
                                f"{[(e['operation'], e['check']) for e in gone]}\n{done.stdout[-4000:]}")
        proc.close_stdin()
        assert proc.wait() == 0
    assert problems == []
