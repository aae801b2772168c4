"""Property: `capture install` on any client file a person may have written either keeps every value they
declared (the file then says exactly what it said before, plus majordomus's entries) or refuses with the file
byte-identical; and `capture uninstall` right after gives back the bytes from before install.

Generated: foreign keys and values of every JSON kind, foreign hook entries under the client's own events and
others, a foreign MCP server, and the person's own formatting (compact, indents of 2 and 4, tabs, CRLF,
non-ASCII, a missing trailing newline) — through the library for many files, and through the real executables
for a few.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clients.samples import INSTALLABLE, SAMPLES
from majordomus.clients.install import install, remove_hooks
from majordomus.clients.providers import Provider, get_provider
from majordomus.clients.uninstall import uninstall
from majordomus.errors import RefusedError
from support import MAJORDOMUS

RESERVED = {"hooks", "mcpServers", "version", "hooksConfig"}
scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.floats(allow_nan=False, width=32),
                    st.text(max_size=12))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                      st.dictionaries(st.text(max_size=6), inner, max_size=3)),
                      max_leaves=8)
keys = st.text(min_size=1, max_size=10).filter(lambda k: k not in RESERVED)


def foreign_handler(provider: Provider, command: str) -> dict[str, Any]:
    key = SAMPLES[provider.name]["wired"]["command_key"]
    return {"type": "command", key: command}


@st.composite
def client_file(draw: st.DrawFn, name: str) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """(the hook file's document, the MCP file's document when it is another file)."""
    p = get_provider(name)
    assert p.install is not None and p.session is not None
    doc: dict[str, Any] = draw(st.dictionaries(keys, values, max_size=4))
    events = [e for names in p.session.events.values() for e in names] + ["SomeOtherEvent"]
    hooks: dict[str, Any] = {}
    for event in draw(st.lists(st.sampled_from(events), unique=True, max_size=3)):
        commands = draw(st.lists(st.text(min_size=1, max_size=20).map(lambda t: f"echo {t!r}"), min_size=1,
                                 max_size=2))
        handlers = [foreign_handler(p, c) for c in commands]
        hooks[event] = handlers if p.install.hook_style == "flat" else [{"hooks": handlers}]
    if hooks:
        doc["hooks"] = hooks
    mcp_doc: dict[str, Any] | None = None
    server = {"command": draw(st.text(min_size=1, max_size=10)), "args": []}
    if p.mcp_config == p.config:
        if draw(st.booleans()):
            doc["mcpServers"] = {"other": server}
    elif p.mcp_config and not p.mcp_config.endswith(".toml") and draw(st.booleans()):
        mcp_doc = {"mcpServers": {"other": server}, **draw(st.dictionaries(keys, values, max_size=2))}
    return doc, mcp_doc


formats = st.sampled_from([{"indent": None, "separators": (",", ":")}, {"indent": 2}, {"indent": 4},
                           {"indent": "\t"}, {"indent": 2, "ensure_ascii": False}])


def spelled(doc: dict[str, Any], fmt: dict[str, Any], crlf: bool, newline: bool) -> bytes:
    text = json.dumps(doc, **fmt) + ("\n" if newline else "")
    return (text.replace("\n", "\r\n") if crlf else text).encode("utf-8")


def without_majordomus(doc: dict[str, Any], p: Provider, before: dict[str, Any]) -> dict[str, Any]:
    """The document with majordomus's entries taken out, and the keys install adds where the person had none."""
    assert p.install is not None
    out = json.loads(json.dumps(doc))
    remove_hooks(out, p, p.install)
    servers = out.get("mcpServers")
    if isinstance(servers, dict) and "majordomus" in servers:
        del servers["majordomus"]
        if not servers and "mcpServers" not in before:
            del out["mcpServers"]
    for key in p.install.top_extra:
        if key not in before:
            out.pop(key, None)
    if p.install.switch is not None:
        section, key = p.install.switch
        part = out.get(section)
        if isinstance(part, dict) and key not in (before.get(section) or {}):
            part.pop(key, None)
            if not part and section not in before:
                del out[section]
    return dict(out)


def new_repo(base: Path) -> Path:
    repo = base / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    subprocess.run([str(MAJORDOMUS), "init"], cwd=repo, check=True, capture_output=True)
    return repo


def check_one(repo: Path, name: str, doc: dict[str, Any], mcp_doc: dict[str, Any] | None, raw: bytes,
              mcp_raw: bytes | None, *, real: bool) -> None:
    p = get_provider(name)
    assert p.config
    target = repo / p.config
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(raw)
    mcp_path = repo / p.mcp_config if p.mcp_config and mcp_raw is not None else None
    if mcp_path is not None:
        mcp_path.parent.mkdir(parents=True, exist_ok=True)
        mcp_path.write_bytes(mcp_raw or b"")
    if real:
        done = subprocess.run([str(MAJORDOMUS), "capture", "install", "--provider", name], cwd=repo,
                              capture_output=True, text=True, timeout=60)
        refused = done.returncode == 15
        assert done.returncode in (0, 15), done.stderr
    else:
        try:
            install(repo, name)
            refused = False
        except RefusedError:
            refused = True
    if refused:
        assert target.read_bytes() == raw
        assert mcp_path is None or mcp_path.read_bytes() == mcp_raw
        return
    shared_hooks = p.hooks_file() == p.config
    after = json.loads(target.read_text(encoding="utf-8"))
    if shared_hooks or p.mcp_config == p.config:
        assert without_majordomus(after, p, doc) == doc
    else:
        assert after == doc  # the hooks went to the per-person file: the person's own file was not rewritten
    if mcp_path is not None and mcp_doc is not None:
        assert without_majordomus(json.loads(mcp_path.read_text(encoding="utf-8")), p, mcp_doc) == mcp_doc
    if real:
        subprocess.run([str(MAJORDOMUS), "capture", "uninstall", "--provider", name], cwd=repo, check=True,
                       capture_output=True, timeout=60)
    else:
        uninstall(repo, name)
    assert target.read_bytes() == raw
    assert mcp_path is None or mcp_path.read_bytes() == mcp_raw


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(INSTALLABLE).flatmap(lambda n: st.tuples(st.just(n), client_file(n))), formats, formats,
       st.booleans(), st.booleans())
def test_install_keeps_every_value_a_person_declared_and_uninstall_gives_the_bytes_back(
        case: tuple[str, tuple[dict[str, Any], dict[str, Any] | None]], fmt: dict[str, Any],
        mcp_fmt: dict[str, Any], crlf: bool, newline: bool) -> None:
    name, (doc, mcp_doc) = case
    raw = spelled(doc, fmt, crlf, newline)
    mcp_raw = spelled(mcp_doc, mcp_fmt, False, True) if mcp_doc is not None else None
    with tempfile.TemporaryDirectory() as tmp:
        check_one(new_repo(Path(tmp)), name, doc, mcp_doc, raw, mcp_raw, real=False)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(INSTALLABLE).flatmap(lambda n: st.tuples(st.just(n), client_file(n))), formats)
def test_the_real_commands_keep_a_persons_values_and_give_the_bytes_back(
        case: tuple[str, tuple[dict[str, Any], dict[str, Any] | None]], fmt: dict[str, Any]) -> None:
    name, (doc, mcp_doc) = case
    with tempfile.TemporaryDirectory() as tmp:
        check_one(new_repo(Path(tmp)), name, doc, mcp_doc, spelled(doc, fmt, False, True),
                  spelled(mcp_doc, fmt, False, True) if mcp_doc is not None else None, real=True)
