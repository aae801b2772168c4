"""`capture status`: one row per provider and aspect — what it offers, how it is wired here, and the evidence.

`verified` is earned only by a dry-run self-test through the real executable (a subprocess, never a function
call): for `generic:session` the `capture session --provider generic` path, for a wired hook client the very
command line its configuration names.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from majordomus.clients.evidence import last_events
from majordomus.clients.hook_command import FLAGS, is_ours, parse
from majordomus.clients.install import (
    WantedHook,
    find_executable,
    hook_commands,
    install_gap,
    is_connection,
    our_places,
    read_json_config,
    wanted_hooks,
)
from majordomus.clients.providers import Provider, load_providers
from majordomus.clients.trust import untrusted
from majordomus.errors import RefusedError

SCHEMA = "majordomus.capture-status/v1"
SELFTEST_SECONDS = 10.0
State = Literal["unsupported", "unadapted", "unconfigured", "named", "wired", "verified", "untrusted"]
Aspect = Literal["session", "prompt"]


@dataclass(frozen=True)
class Row:
    provider: str
    aspect: Aspect
    capability: str
    state: State
    reason: str
    evidence: str
    last_event: str | None = None  # when a real event of this aspect from this client last reached capture here

    @property
    def label(self) -> str:
        return f"{self.provider}:session" if self.aspect == "session" else self.provider


@dataclass
class SelfTest:
    """A dry run started now and read later, so every client's self-test runs at once."""

    argv: list[str]
    marker: str
    process: subprocess.Popen[bytes] | None = None
    failure: str | None = None

    def start(self, root: Path, payload: dict[str, Any]) -> SelfTest:
        env = {**os.environ, "MAJORDOMUS_SESSION_DRY_RUN": "1"}  # belt and braces: the flag, and the switch
        try:
            self.process = subprocess.Popen(self.argv, cwd=root, env=env, stdin=subprocess.PIPE,
                                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        except OSError as exc:
            self.failure = f"the self-test could not start {self.argv[0]}: {exc.strerror}"
            return self
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(json.dumps(payload).encode())
            self.process.stdin.close()
        except BrokenPipeError:
            pass
        self.process.stdin = None  # closed already: communicate() must not flush it
        return self

    def passed(self) -> tuple[bool, str]:
        if self.process is None:
            return False, self.failure or "the self-test did not run"
        try:
            _, err = self.process.communicate(timeout=SELFTEST_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.communicate()
            return False, f"the dry-run self-test took longer than {SELFTEST_SECONDS:g} s"
        text = err.decode("utf-8", "replace").strip()
        if self.process.returncode == 0 and self.marker in text:
            return True, ""
        if self.process.returncode == 2 and "--dry-run" in text:
            return False, f"{' '.join(self.argv[1:3])} offers no --dry-run yet, so it cannot be self-tested"
        last = text.splitlines()[-1] if text else "no report line"
        return False, f"the dry-run self-test exited {self.process.returncode}: {last}"


def _selftest_id() -> str:
    return f"selftest-{os.getpid()}"


def _connection_row(root: Path, p: Provider, pending: list[tuple[int, SelfTest]], index: int) -> Row:
    evidence = p.evidence.get("episode", "")
    mcp = find_executable("majordomus-mcp")
    exe = find_executable("majordomus")
    if mcp is None or exe is None:
        missing = "majordomus-mcp" if mcp is None else "majordomus"
        return Row(p.name, "session", "connection", "unconfigured",
                   f"{missing} is not found beside {os.path.dirname(sys.executable)} or on PATH", evidence)
    argv = [str(exe), "--repo", str(root), "capture", "session", "--provider", p.name, "--event", "end", "--dry-run"]
    test = SelfTest(argv, _selftest_id()).start(root, {"session_id": _selftest_id(), "reason": "detach"})
    pending.append((index, test))
    return Row(p.name, "session", "connection", "wired", f"{mcp} is in place", evidence)


def _hook_row(root: Path, p: Provider, aspect: Aspect, pending: list[tuple[int, SelfTest]], index: int,
              distrust: dict[int, str]) -> Row:
    offer_key = "episode" if aspect == "session" else "prompts"
    capability = p.offers.get(offer_key, "none")
    evidence = p.evidence.get(offer_key, "")
    if capability == "none":
        return Row(p.name, aspect, capability, "unsupported", f"declares {offer_key}: none", evidence)
    wants = [w for w in wanted_hooks(p) if w.aspect == aspect]
    gap = install_gap(p)
    if not wants:
        return Row(p.name, aspect, capability, "unadapted",
                   f"declares {offer_key}: {capability} but the providers declaration has no adapter row "
                   f"(or install shape) for it yet", evidence)
    if gap is not None:  # the adapter reads its payloads; nothing here can tell whether the client calls it
        path = "capture session" if aspect == "session" else "capture prompt"
        return Row(p.name, aspect, capability, "unadapted",
                   f"declares {offer_key}: {capability} and `majordomus {path} --provider {p.name}` reads its "
                   f"payloads, but capture install cannot wire it: {gap}", evidence)
    # the client reads both its per-person file (where install writes) and its tracked one (an older install's)
    rels = list(p.hook_files())
    install = f"run majordomus capture install --provider {p.name}"
    present = [r for r in rels if (root / r).exists()]
    if not present:
        return Row(p.name, aspect, capability, "unconfigured", f"{rels[0] if rels else 'its configuration'} is "
                   f"missing; {install}", evidence)
    assert p.install is not None  # install_gap is None only for a provider with an install shape
    commands: dict[str, list[str]] = {}
    docs: dict[str, dict[str, Any]] = {}
    if p.install.hook_style == "executables":  # one script per event in a folder: no file to parse
        from majordomus.clients import install_executables

        commands = install_executables.commands(root, p, [w.client_event for w in wants])
        present = []
    for rel in present:
        try:
            doc, _ = read_json_config(root, rel)
        except RefusedError as err:
            return Row(p.name, aspect, capability, "named", f"{err.message}", evidence)
        docs[rel] = doc or {}
        for event, found in hook_commands(doc or {}, p.install).items():
            commands.setdefault(event, []).extend(found)
    places = our_places(docs.get(p.hooks_file() or "", {}), p, p.install)
    sentence = untrusted(root, p, {e: v for e, v in places.items() if e in {w.client_event for w in wants}})
    if sentence is not None:
        distrust[index] = sentence
    rel = " and ".join(present) or f"{rels[0]}/"
    missing = [w.client_event for w in wants if not any(is_ours(c, w.tail) for c in commands.get(w.client_event, []))]
    if missing:
        return Row(p.name, aspect, capability, "named",
                   f"{rel} {'exists' if len(present) == 1 else 'exist'} but {'does' if len(present) == 1 else 'do'} "
                   f"not call majordomus for {', '.join(missing)}; {install}", evidence)
    probe = parse(_probe_command(wants, commands)[1])
    assert probe is not None  # _probe_command returns a command is_ours accepted
    resolved = _resolve(probe.executable)
    python_gone = probe.interpreter is not None and _resolve(probe.interpreter) is None  # nothing starts the launcher
    if resolved is None or python_gone:
        named = probe.interpreter if python_gone and probe.interpreter is not None else probe.executable
        where = "" if os.sep in named else " on this PATH"
        return Row(p.name, aspect, capability, "named",
                   f"{rel} calls {named}, which is not an executable{where} here (so the hooks do nothing); {install}"
                   + ("" if not where else ", or put majordomus on the PATH the client starts with"), evidence)
    events = ", ".join(w.client_event for w in wants)
    start = [resolved] if probe.interpreter is None else [probe.interpreter, FLAGS, resolved]
    pending.append((index, _hook_selftest(root, p, aspect, [*start, *probe.words])))
    told = f"{rel} calls {probe.executable} for {events}"
    if p.install.hook_style == "executables" and aspect == "session" and not p.mcp_config:
        told += (f" (its MCP server is not wired by install: {p.title} reads MCP servers only from a file in your "
                 "HOME, see capture install's note)")
    return Row(p.name, aspect, capability, "wired", told, evidence)


def _resolve(command: str) -> str | None:
    """The executable a client would run: an absolute path as it is, a bare name (a shared file's) through PATH."""
    if os.sep in command:
        return command if Path(command).is_absolute() and os.access(command, os.X_OK) else None
    return shutil.which(command)


def _probe_command(wants: list[WantedHook], commands: dict[str, list[str]]) -> tuple[WantedHook, str]:
    """The configured command to dry-run: the end event for sessions (nothing to open), else the only one."""
    ordered = sorted(wants, key=lambda w: w.tail[-1] != "end")
    want = ordered[0]
    return want, next(c for c in commands[want.client_event] if is_ours(c, want.tail))


def _hook_selftest(root: Path, p: Provider, aspect: Aspect, words: list[str]) -> SelfTest:
    """The client's own command line plus --dry-run, with a payload spelled in the client's own keys."""
    marker = _selftest_id()
    payload: dict[str, Any] = {}
    if aspect == "session" and p.session is not None:
        _put(payload, p.session.session_keys[0], marker)
        if p.session.reason_keys:
            _put(payload, p.session.reason_keys[0], "other")
    elif p.prompt is not None:
        _put(payload, p.prompt.session_keys[0], marker)
        if p.prompt.text_keys:
            _put(payload, p.prompt.text_keys[0], "majordomus capture status self-test")
    return SelfTest([*words, "--dry-run"], marker).start(root, payload)


def _put(payload: dict[str, Any], key: str, text: str) -> None:
    """Set a row's key as the client would send it: a dotted key (tool_info.user_prompt) is a nested object."""
    *outer, last = key.split(".")
    node = payload
    for part in outer:
        node = node.setdefault(part, {})
    node[last] = text


def rows(root: Path) -> list[Row]:
    table = load_providers()
    out: list[Row] = []
    pending: list[tuple[int, SelfTest]] = []
    distrust: dict[int, str] = {}
    for name in sorted(table):
        p = table[name]
        for aspect in ("session", "prompt"):
            index = len(out)
            if aspect == "session" and is_connection(p):
                out.append(_connection_row(root, p, pending, index))
            else:
                out.append(_hook_row(root, p, aspect, pending, index, distrust))
    for index, test in pending:
        ok, why = test.passed()
        row = out[index]
        if ok:
            path = "capture session" if row.aspect == "session" else "capture prompt"
            out[index] = replace(row, state="verified", reason=f"{row.reason}; a dry run through `majordomus {path} "
                                 f"--provider {row.provider}` reached the real path and wrote nothing")
        else:
            out[index] = replace(row, reason=f"{row.reason}; {why}")
    for index, sentence in distrust.items():  # majordomus's half may be verified; the client's half is not
        row = out[index]
        if row.state in ("wired", "verified"):
            out[index] = replace(row, state="untrusted", reason=f"{sentence} (majordomus's half: {row.reason})")
    seen = last_events(root)
    for index, row in enumerate(out):
        if row.state in ("unsupported", "unadapted"):
            continue
        at = seen.get((row.provider, row.aspect))
        told = f"last real event here {at}" if at else "no real event from it has reached capture here yet"
        out[index] = replace(row, reason=f"{row.reason}; {told}", last_event=at)
    return out


def render_text(found: list[Row]) -> str:
    w_label = max(len(r.label) for r in found)
    w_cap = max(len(r.capability) for r in found)
    w_state = max(len(r.state) for r in found)
    return "\n".join(f"{r.label:<{w_label}}  {r.capability:<{w_cap}}  {r.state:<{w_state}}  {r.reason} — {r.evidence}"
                     for r in found)
