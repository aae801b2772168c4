"""`majordomus doctor`: findings as values — the layer, the policy, the providers declaration, the episodes.

Each check reads and reports; none repairs. A finding names the command that repairs (or shows) what it found.
Exit 0 when nothing FAILs, 10 (a declared rule is broken) when something does.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from pathlib import Path

from majordomus.errors import ContractError, MajordomusError
from majordomus.findings import Finding
from majordomus.identity import git, now_s, worktree_id
from majordomus.layout import PRIVATE_DIR, Layout
from majordomus.policy import DEFAULTS, Policy, load_policy

Check = Callable[[Layout], list[Finding]]
GIT_SECONDS = 5.0
SHOWN = 5  # ids named in one finding; the count is always whole


def _rel(layout: Layout, path: os.PathLike[str] | str) -> str:
    return os.path.relpath(path, layout.root)


def _named(items: list[str]) -> str:
    more = f" and {len(items) - SHOWN} more" if len(items) > SHOWN else ""
    return ", ".join(items[:SHOWN]) + more


# ---------------------------------------------------------------------------------------------------------------
# The layer


def check_layer(layout: Layout) -> list[Finding]:
    if layout.ai.is_symlink():
        return [Finding("FAIL", "layer", ".ai", "is a symbolic link; majordomus never follows links in .ai/ — "
                                               "replace it with a real directory")]
    if not layout.ai.is_dir():
        return [Finding("FAIL", "layer", ".ai", f"no majordomus layer in {layout.root}; nothing is recorded here",
                        "majordomus init")]
    missing = [_rel(layout, p) for p in (layout.policy_file, layout.state) if not p.exists()]
    if missing:
        return [Finding("FAIL", "layer", ".ai", f"the layer is incomplete: {', '.join(missing)} missing",
                        "majordomus update")]
    return [Finding("OK", "layer", ".ai", "the layer is in place")]


def check_dirs(layout: Layout) -> list[Finding]:
    found: list[Finding] = []
    private = set(layout.private_dirs())
    for path in layout.all_dirs():
        rel = _rel(layout, path) + "/"
        if path.is_symlink():
            found.append(Finding("FAIL", "layer", rel, "is a symbolic link; majordomus refuses to follow it — "
                                                       "replace it with a real directory"))
            continue
        if not path.is_dir():
            found.append(Finding("FAIL", "layer", rel, "is missing", "majordomus update"))
            continue
        mode = stat.S_IMODE(path.stat().st_mode)
        if path in private and mode != PRIVATE_DIR:
            found.append(Finding("FAIL", "layer", rel, f"is mode {mode:o}; it holds what only its owner may read "
                                                       f"({PRIVATE_DIR:o})", "majordomus update"))
        elif path not in private and mode & 0o022:
            found.append(Finding("FAIL", "layer", rel, f"is mode {mode:o}, writable by others; records could be "
                                                       "changed by anyone here", "majordomus update"))
    if not found:
        found.append(Finding("OK", "layer", ".ai/", f"{len(layout.all_dirs())} directories present; the "
                                                    f"{len(private)} private ones are {PRIVATE_DIR:o}"))
    return found


def check_ignored(layout: Layout) -> list[Finding]:
    """`.ai/local/` holds private state and prompts: git must ignore it and track nothing under it."""
    if git(layout.root, "rev-parse", "--git-dir", timeout=GIT_SECONDS) is None:
        return [Finding("INFO", "layer", ".ai/local/", "not a git checkout; whether it is ignored cannot be asked")]
    found: list[Finding] = []
    tracked = git(layout.root, "ls-files", "--", ".ai/local", timeout=GIT_SECONDS)
    if tracked:
        count = len(tracked.splitlines())
        found.append(Finding("FAIL", "layer", ".ai/local/", f"{count} file(s) under it are tracked by git; private "
                                                            "state and prompts would be pushed",
                             "git rm -r --cached .ai/local"))
    if git(layout.root, "check-ignore", "-q", ".ai/local/", timeout=GIT_SECONDS) is None:
        found.append(Finding("FAIL", "layer", ".ai/local/", "is not ignored by git; private state and prompts could "
                                                            "be committed", "majordomus update"))
    if not found:
        found.append(Finding("OK", "layer", ".ai/local/", "ignored by git and nothing under it is tracked"))
    return found


# ---------------------------------------------------------------------------------------------------------------
# The policy and the providers declaration


def _policy(layout: Layout) -> tuple[Policy | None, ContractError | None]:
    try:
        return load_policy(layout), None
    except ContractError as err:
        return None, err


def check_policy(layout: Layout) -> list[Finding]:
    rel = _rel(layout, layout.policy_file)
    if not layout.policy_file.exists():
        return []  # check_layer names the missing file
    policy, err = _policy(layout)
    if err is not None:
        return [Finding("FAIL", "policy", rel, f"{err.message}; every command falls back to the defaults and "
                                               "capture prune refuses until it parses — fix the YAML")]
    assert policy is not None
    found = [Finding("FAIL", "policy", rel, f"{problem}; its default applies until it is fixed")
             for problem in policy.problems]
    undeclared = [k for k in DEFAULTS if k not in policy.declared]
    if undeclared:
        found.append(Finding("INFO", "policy", rel, f"{len(undeclared)} key(s) not declared take their defaults: "
                                                    f"{', '.join(undeclared)}", "majordomus update"))
    if not policy.problems:
        found.append(Finding("OK", "policy", rel, f"parses; {len(policy.declared)} of {len(DEFAULTS)} keys "
                                                  "declared, each a valid value"))
    if policy.otlp_endpoint is not None:
        found.append(Finding("INFO", "policy", rel, f"telemetry: the shared server exports the ended episodes to "
                                                    f"{policy.otlp_endpoint} every {policy.otlp_interval_seconds} s "
                                                    "(docs/otlp.md)"))
    return found


def check_providers(layout: Layout) -> list[Finding]:
    from majordomus.clients import providers

    subject = "providers.yaml"
    try:
        raw = json.loads(providers.JSON_PATH.read_bytes())
    except (OSError, ValueError) as exc:
        return [Finding("FAIL", "providers", subject, f"the shipped providers.json cannot be read ({exc}); "
                                                      "no client can be admitted",
                        "pip install --force-reinstall majordomus")]
    found = [Finding("FAIL", "providers", subject, problem, "python -m majordomus.clients.providers --check")
             for problem in providers.problems(raw)]
    if providers.YAML_PATH.exists():
        try:
            stale = providers.JSON_PATH.read_text(encoding="utf-8") != providers.yaml_to_json_text()
        except Exception as exc:  # noqa: BLE001 — a YAML error is a finding, not a crash of doctor
            stale, found = False, found + [Finding("FAIL", "providers", subject, f"does not parse: {exc}")]
        if stale:
            found.append(Finding("FAIL", "providers", "providers.json", "differs from providers.yaml; the hook path "
                                                                        "reads a stale declaration",
                                 "python -m majordomus.clients.providers --write-json"))
    if not found:
        count = len(raw.get("providers") or {})
        found.append(Finding("OK", "providers", subject, f"{count} providers declared, every offer with its evidence"))
    return found


# ---------------------------------------------------------------------------------------------------------------
# Episodes


def check_session_log(layout: Layout) -> list[Finding]:
    path = layout.context_log
    rel = _rel(layout, path)
    try:
        lines = [ln for ln in path.read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()]
    except FileNotFoundError:
        return []
    if not lines:
        return []
    last = lines[-1] if len(lines[-1]) <= 200 else lines[-1][:199] + "…"
    return [Finding("FAIL", "sessions", rel, f"{len(lines)} failure(s) of capture session were logged; the most "
                                             f"recent: {last} — read it, fix the cause, then empty the file",
                    f"cat {rel}")]


def check_episodes(layout: Layout) -> list[Finding]:
    from majordomus.episodes import store
    from majordomus.episodes.boundary import context_path
    from majordomus.episodes.recover import classify, is_here
    from majordomus.episodes.vanished import end_vanished_quietly

    ended = end_vanished_quietly(layout)  # by evidence, before anything is judged by time (SPEC 4.4)
    policy, _ = _policy(layout)
    values: dict[str, int] = policy.values if policy is not None else dict(DEFAULTS)
    stale_after = values["session.stale_after_hours"] * 3600
    grace = values["episodes.reattach_grace_seconds"]
    now = now_s()
    here = worktree_id(layout.root)
    rel_open = _rel(layout, layout.sessions_open) + "/"
    names = {n[: -len(".yaml")] for n in store.listed(layout.sessions_open, ".yaml")}
    episodes = list(store.open_episodes(layout))
    unreadable = sorted(names - {e.key for e in episodes})
    mine = [e.file for e in episodes if is_here(e.file, here)]  # another worktree's episode is its own doctor's
    by_verdict: dict[str, list[str]] = {}
    no_context: list[str] = []
    for opened in mine:
        if not context_path(layout, opened.session_id, str(opened.started_at)).exists():
            no_context.append(opened.session_id)
        verdict = classify(opened, now, stale_after=stale_after, grace=grace)
        by_verdict.setdefault(verdict, []).append(f"{opened.session_id} ({opened.provider})")
    stale, expired, orphaned = (by_verdict.get(v, []) for v in ("stale", "expired", "orphaned"))
    found: list[Finding] = [Finding("INFO", "sessions", rel_open, line) for line in ended]
    if unreadable:
        found.append(Finding("FAIL", "sessions", rel_open, f"{len(unreadable)} open-episode file(s) cannot be read "
                                                           f"(no session_id): {_named(unreadable)}; no end can close "
                                                           "them — look at them, then move them aside"))
    if stale:
        hours = values["session.stale_after_hours"]
        found.append(Finding("WARN", "sessions", rel_open, f"{len(stale)} hook episode(s) idle for more than {hours} "
                                                           f"hour(s) whose end never came: {_named(stale)}",
                             "majordomus capture recover"))
    if expired:
        found.append(Finding("WARN", "sessions", rel_open, f"{len(expired)} connection episode(s) detached past the "
                                                           f"{grace} s grace with no live server "
                                                           f"to reap them: {_named(expired)}",
                             "majordomus capture recover"))
    if orphaned:  # a client that SIGKILLs its server (Copilot, 3 ms after SIGTERM) leaves this after every exit
        found.append(Finding("INFO", "sessions", rel_open, f"{len(orphaned)} connection episode(s) held by a server "
                                                           f"that is gone (killed before it could mark them): "
                                                           f"{_named(orphaned)}; they are detached, and the next "
                                                           "server start-up or recover starts their grace",
                             "majordomus capture recover"))
    if no_context:
        found.append(Finding("WARN", "sessions", _rel(layout, layout.contexts_dir) + "/",
                             f"{len(no_context)} open episode(s) have no working context, so prompts cannot be "
                             f"linked to them after the close: {_named(no_context)}"))
    if len(found) == len(ended):
        found.append(Finding("OK", "sessions", rel_open, f"{len(mine)} open episode(s) here, none stale, each with its "
                                                         "working context"))
    return found


def check_lease(layout: Layout) -> list[Finding]:
    path = layout.lease_file
    rel = _rel(layout, path)
    if path.is_symlink():
        return [Finding("FAIL", "server", rel,
                        "is a symbolic link; majordomus never follows links in .ai/ — remove it")]
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return [Finding("INFO", "server", rel, "no shared server is running for this repository")]
    from majordomus.identity import is_live_majordomus
    from majordomus.mcp.lease import parse_lease

    lease = parse_lease(raw)
    if isinstance(lease, str):
        return [Finding("WARN", "server", rel, "is empty or corrupt; the next majordomus-mcp takes it over")]
    pid = lease.pid
    if not is_live_majordomus(pid):
        # nothing for a person to do: the next start takes a dead server's lease over (a client that SIGKILLs
        # its server right after SIGTERM leaves one behind in an ordinary exit)
        return [Finding("INFO", "server", rel, f"names pid {pid}, which is not a running majordomus (a killed "
                                               "server); the next majordomus-mcp takes it over, and its "
                                               "connection episodes are recover's after the grace")]
    return [Finding("OK", "server", rel, f"shared server pid {pid} at {lease.url or '(binding)'}")]


# ---------------------------------------------------------------------------------------------------------------


def check_tracked_credentials(layout: Layout) -> list[Finding]:
    """A tracked session record that still holds a credential (written before today's redaction): teams push these."""
    from majordomus.archive.scrub import HISTORY, tracked_with_credentials

    found = tracked_with_credentials(layout)
    if not found:
        return []
    rules = sorted({r for c in found for r in c.rules})
    names = ", ".join(c.rel for c in found[:5]) + (" …" if len(found) > 5 else "")
    return [Finding("WARN", "sessions", _rel(layout, layout.sessions_dir) + "/",
                    f"{len(found)}{'+' if len(found) >= 20 else ''} tracked session record(s) hold a credential "
                    f"({', '.join(rules)}): {names}; `majordomus capture scrub` redacts them in place (then commit); "
                    f"{HISTORY}", "majordomus capture scrub --dry-run")]


def wired_launchers(layout: Layout) -> dict[str, list[tuple[str, str | None, str | None]]]:
    """Every hook command of ours in this repository's client files: file -> [(executable, form, interpreter)],
    form `None` for the fail-open command of this version and a sentence for an older install's bare command;
    interpreter the python the command starts the launcher with (`python -IS launcher`), else None."""
    from majordomus.clients.hook_command import LAUNCHER, parse
    from majordomus.clients.install import hook_commands, read_json_config
    from majordomus.clients.providers import load_providers

    out: dict[str, list[tuple[str, str | None, str | None]]] = {}
    for provider in load_providers().values():
        if provider.install is None or provider.install.hook_style is None:
            continue
        if provider.install.hook_style == "executables":  # one script per event: each is a wired file
            from majordomus.clients import install_executables
            from majordomus.clients.install import wanted_hooks

            files = [(install_executables.rel_of(provider, w.client_event), [w.client_event])
                     for w in wanted_hooks(provider)]
        else:
            files = [(rel, []) for rel in provider.hook_files()]
        for rel, events in files:
            if rel in out or not (layout.root / rel).is_file():
                continue
            if events:
                found_commands = install_executables.commands(layout.root, provider, events)
            else:
                try:
                    doc, _ = read_json_config(layout.root, rel)
                except MajordomusError:
                    continue  # status and install say what is wrong with the file itself
                found_commands = hook_commands(doc or {}, provider.install)
            for commands in found_commands.values():
                for command in commands:
                    found = parse(command)
                    if found is None or "capture" not in found.words:
                        continue
                    fail_open = command.strip().endswith("exit 0") and Path(found.executable).name == LAUNCHER
                    form = None if fail_open else (f"runs {found.executable} without the fail-open guard (an "
                                                   "earlier install wrote it)")
                    entry = (found.executable, form, found.interpreter)
                    if entry not in out.setdefault(rel, []):
                        out[rel].append(entry)
    return out


def check_launcher(layout: Layout) -> list[Finding]:
    """Which launcher the hooks run, whether it starts here, and what went wrong when a hook failed open."""
    import shutil

    from majordomus.clients.hook_command import FLAGS

    found: list[Finding] = []
    for rel, launchers in wired_launchers(layout).items():
        for executable, form, interpreter in launchers:
            resolved = executable if os.sep in executable else shutil.which(executable)
            how = f"by name, found on this PATH at {resolved}" if os.sep not in executable else "by path"
            if form is not None:
                found.append(Finding("WARN", "hooks", rel, f"{form}: on a clone where it is missing or broken, the "
                                                           "client's turn can be refused; install again to replace it",
                                     "majordomus capture install --provider <client>"))
            elif interpreter is not None and not os.access(interpreter, os.X_OK):
                found.append(Finding("FAIL", "hooks", rel,
                                     f"the hooks start {executable} with {interpreter}, which is gone (the "
                                     "virtualenv moved, or was removed): they do nothing here, and the client runs "
                                     "as if it were not wired", "majordomus capture install --provider <client>"))
            elif resolved is None or not os.access(resolved, os.X_OK if interpreter is None else os.R_OK):
                where = "is not on this PATH" if os.sep not in executable else "is gone (moved, or uninstalled)"
                found.append(Finding("WARN" if os.sep not in executable else "FAIL", "hooks", rel,
                                     f"the hooks run {executable}, which {where}: they do nothing here, and the "
                                     "client runs as if it were not wired",
                                     "majordomus capture install --provider <client>"))
            else:
                argv = [str(resolved)] if interpreter is None else [interpreter, FLAGS, str(resolved)]
                how += "" if interpreter is None else f", started as {interpreter} {FLAGS}"
                found.append(_launcher_starts(rel, executable, argv, how))
    found.extend(_hook_failures(layout))
    return found


def _launcher_starts(rel: str, executable: str, argv: list[str], how: str) -> Finding:
    """The launcher the hooks name starts and answers (its interpreter is there, majordomus imports)."""
    import shlex
    import subprocess

    try:
        done = subprocess.run([*argv, "--version"], capture_output=True, text=True, timeout=20,
                              stdin=subprocess.DEVNULL)
        said = done.stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        said = f"({type(exc).__name__})"
    if not said.startswith("majordomus "):
        return Finding("FAIL", "hooks", rel, f"the hooks run {executable} ({how}), which does not start: "
                                             f"{said or 'it printed nothing'}; the hooks do nothing until it is "
                                             "repaired — reinstall majordomus (pipx reinstall majordomus, or uv tool "
                                             "install --reinstall majordomus), then install the hooks again",
                       f"{shlex.join(argv)} --version")
    return Finding("OK", "hooks", rel, f"the hooks run {executable} ({how}; {said}): it imports nothing before "
                                       "majordomus, and fails open")


def _hook_failures(layout: Layout) -> list[Finding]:
    path = layout.hook_failures_log
    rel = _rel(layout, path)
    try:
        lines = [ln for ln in path.read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()]
    except FileNotFoundError:
        return []
    except OSError as exc:
        return [Finding("WARN", "hooks", rel, f"cannot be read ({exc.strerror})")]
    if not lines:
        return []
    last = lines[-1] if len(lines[-1]) <= 300 else lines[-1][:299] + "…"
    return [Finding("FAIL", "hooks", rel, f"{len(lines)} hook run(s) failed open (the client was not held up); the "
                                          f"most recent: {last} — repair what it names, then empty the file",
                    f"cat {rel}")]


CHECKS: tuple[Check, ...] = (check_dirs, check_ignored, check_policy, check_providers, check_launcher,
                             check_session_log, check_episodes, check_lease, check_tracked_credentials)


def archive_findings(layout: Layout) -> list[Finding]:
    """The prompt archive's own findings (SPEC 5.7), from the module that owns the archive."""
    from majordomus.archive.findings import findings

    return list(findings(layout))


def findings(layout: Layout) -> list[Finding]:
    found = check_layer(layout)
    if not layout.ai.is_dir() or layout.ai.is_symlink():
        return found  # nothing else can be asked of a layer that is not there
    for check in CHECKS:
        found.extend(check(layout))
    found.extend(archive_findings(layout))
    return found
