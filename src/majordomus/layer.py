"""`init` and `update`: the layer as a list of small, idempotent convergence steps; and `history --rotate`."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable

from majordomus.errors import RefusedError
from majordomus.layout import (
    PRIVATE_DIR,
    PRIVATE_FILE,
    Layout,
    ensure_dir,
    refuse_symlink,
    sweep_stale_temps,
    write_atomic,
)
from majordomus.policy import (
    DEFAULTS,
    Unplaceable,
    default_policy_text,
    load_policy,
    same_values,
    validate_raw,
    with_missing_keys,
)

SHARED_DIR = 0o755
IGNORE_LINE = ".ai/local/"
SESSIONS_README = """# Episode records

One Markdown file per closed episode, written by `majordomus capture session` and never rewritten.
`outcome: closed` means someone ended the episode on purpose; `outcome: interrupted` means the agent
vanished (a crash, a kill, a lost connection past the grace). The file name is
`<closed at>--<session id>--<branch>--<head>--<random>.md`; the identity is `session_id`.
"""

Step = Callable[[Layout], list[str]]


def _dirs(layout: Layout) -> list[str]:
    changed: list[str] = []
    for path in layout.all_dirs():
        mode = PRIVATE_DIR if path in layout.private_dirs() else SHARED_DIR
        existed = path.is_dir()
        before = stat.S_IMODE(path.stat().st_mode) if existed else None
        ensure_dir(path, mode)
        if not existed:
            changed.append(f"created {path.relative_to(layout.root)}/")
        elif before != mode:
            changed.append(f"set {path.relative_to(layout.root)}/ to {mode:o}")
    return changed


def _archive_files(layout: Layout) -> list[str]:
    """Prompt records are the most private thing written here: 0600 each, whatever the umask was."""
    count = 0
    for entry in os.scandir(layout.prompts_dir):
        if entry.is_symlink() or not entry.is_file():
            continue
        if stat.S_IMODE(entry.stat().st_mode) != PRIVATE_FILE:
            os.chmod(entry.path, PRIVATE_FILE)
            count += 1
    return [f"set {count} archive file(s) to 600"] if count else []


def _policy(layout: Layout) -> list[str]:
    path = layout.policy_file
    refuse_symlink(path)
    if not path.exists():
        write_atomic(path, default_policy_text().encode(), 0o644)
        return [f"wrote {path.relative_to(layout.root)} with the defaults"]
    policy = load_policy(layout)  # a policy that does not parse: exit 10, the file as it was
    missing = {k: v for k, v in DEFAULTS.items() if k not in policy.declared}
    if not missing:
        return []
    rel = path.relative_to(layout.root)
    data = path.read_bytes()  # bytes: a CRLF file keeps its line breaks
    text = data.decode("utf-8")
    import yaml  # the update path only

    before = yaml.safe_load(text) or {}
    try:
        after_text = with_missing_keys(text, missing)
        after = yaml.safe_load(after_text)
    except (Unplaceable, yaml.YAMLError, ValueError, RecursionError):
        after_text, after = "", None
    joined = {dotted.split(".", 1)[0] for dotted in missing}  # sections the missing keys go into
    kept = {k: v for k, v in before.items() if not (v is None and k in joined)}  # `section:` gains its keys
    written = {**{k: policy.values[k] for k in policy.declared if k in policy.values}, **missing}
    if (not isinstance(after, dict) or not same_values(kept, after) or set(after) - set(before) - joined
            or validate_raw(after, path).problems != policy.problems
            or any(validate_raw(after, path).values[k] != v for k, v in written.items())):
        keys = ", ".join(f"{k}: {v}" for k, v in missing.items())
        raise RefusedError(f"update left {rel} as it was: it cannot add {keys} there without changing what "
                           "you wrote", "add them by hand, then run majordomus doctor")
    write_atomic(path, after_text.encode("utf-8"), stat.S_IMODE(path.stat().st_mode))
    return [f"added {', '.join(missing)} to {rel}"]


def _gitignore(layout: Layout) -> list[str]:
    path = layout.root / ".gitignore"
    refuse_symlink(path)
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    if any(line.strip() in (IGNORE_LINE, "/" + IGNORE_LINE) for line in text.splitlines()):
        return []
    sep = "" if not text or text.endswith("\n") else "\n"
    write_atomic(path, f"{text}{sep}{IGNORE_LINE}\n".encode(), 0o644)
    return [f"added {IGNORE_LINE} to .gitignore"]


def _readme(layout: Layout) -> list[str]:
    path = layout.sessions_dir / "README.md"
    if path.exists():
        return []
    write_atomic(path, SESSIONS_README.encode(), 0o644)
    return [f"wrote {path.relative_to(layout.root)}"]


REPO_IGNORE = """# Written by majordomus: a temp file that a killed write left behind is never a record to share.
.*.tmp
"""


def _repo_ignore(layout: Layout) -> list[str]:
    path = layout.repo_dir / ".gitignore"
    refuse_symlink(path)
    if path.exists() and ".*.tmp" in path.read_text(encoding="utf-8").splitlines():
        return []
    write_atomic(path, REPO_IGNORE.encode(), 0o644)
    return [f"wrote {path.relative_to(layout.root)}"]


def _stale_temps(layout: Layout) -> list[str]:
    """Temp files of killed writes in the tracked folders: never records, so removed once their writer is gone."""
    removed = sum(sweep_stale_temps(directory) for directory in (layout.repo_dir, layout.sessions_dir))
    return [f"removed {removed} stale temp file(s) of killed writes from .ai/repo/"] if removed else []


# the policy last: a policy update refuses to touch leaves the rest of the layer converged
STEPS: tuple[Step, ...] = (_dirs, _archive_files, _gitignore, _repo_ignore, _readme, _stale_temps, _policy)


def converge(layout: Layout) -> list[str]:
    changed: list[str] = []
    for step in STEPS:
        changed.extend(step(layout))
    from majordomus.policy import cached_values

    cached_values(layout)  # the hooks' copy of the policy, so that no hook imports a YAML parser for it
    return changed
