"""The `prepare-commit-msg` hook's part (`capture install --git`): add `Majordomus-Episode: <id>` to a commit
message when exactly one episode of this worktree is open and its agent is running a turn, and never otherwise.

Run as a script by the installed hook (`python -I -S <this file> <message file> [<source> [<sha>]]`), on every
commit: the standard library only, no majordomus import, and it fails open — any error, and a timer at 90 ms,
end it with exit 0 and the message untouched. The installed hook wraps it in `timeout 0.1` as well.
"""

import os
import signal
import subprocess
import sys

BUDGET_SECONDS = 0.09  # 10 ms inside the hook's `timeout 0.1`; MAJORDOMUS_TRAILER_BUDGET_SECONDS raises both


def budget() -> float:
    try:
        raised = float(os.environ.get("MAJORDOMUS_TRAILER_BUDGET_SECONDS", ""))
    except ValueError:
        return BUDGET_SECONDS
    return max(BUDGET_SECONDS, raised - 0.01) if raised == raised and raised < 3600 else BUDGET_SECONDS
TRAILER = "Majordomus-Episode"


def _give_up(*_: object) -> None:
    os._exit(0)


def _members(path: str) -> "dict[str, str]":
    """The flat `key: "value"` lines of an open file (what `episodes.store` writes); nothing else is needed."""
    out: "dict[str, str]" = {}
    with open(path, "rb") as fh:  # a file under our own .ai/local, one level, never a link (checked below)
        data = fh.read(65536)
    for line in data.decode("utf-8", "replace").splitlines():
        key, sep, value = line.partition(":")
        if sep and key and not key.startswith(" "):
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] == '"':
                value = value[1:-1]
            out[key] = value
    return out


def _safe_id(text: str) -> bool:
    return 0 < len(text) <= 80 and text.startswith("s-") and all(c.isascii() and (c.isalnum() or c == "-")
                                                                   for c in text)


def episode_to_name(top: str) -> "str | None":
    """The id of the one open episode of this worktree whose turn is running, else None."""
    folder = os.path.join(top, ".ai", "local", "state", "sessions-open")
    for part in (".ai", ".ai/local", ".ai/local/state", ".ai/local/state/sessions-open"):
        if os.path.islink(os.path.join(top, part)):
            return None
    try:
        names = [n for n in os.listdir(folder) if n.endswith(".yaml") and not n.startswith(".")]
    except OSError:
        return None
    if len(names) != 1:
        return None
    path = os.path.join(folder, names[0])
    if os.path.islink(path):
        return None
    members = _members(path)
    session = str(members.get("session_id", ""))
    if members.get("last_turn") != "running" or not _safe_id(session):
        return None
    return session


def already_named(message: str) -> bool:
    return any(line.lower().startswith(TRAILER.lower() + ":") for line in message.splitlines())


def main(argv: "list[str]") -> int:
    signal.signal(signal.SIGALRM, _give_up)
    seconds = budget()
    signal.setitimer(signal.ITIMER_REAL, seconds)
    if len(argv) < 2:
        return 0
    message_file = argv[1]
    top = os.getcwd()  # git runs the hook at the top of the worktree
    session = episode_to_name(top)
    if session is None:
        return 0
    with open(message_file, encoding="utf-8", errors="replace") as fh:
        if already_named(fh.read()):
            return 0  # a merge, a squash or an amend that carries one already
    subprocess.run(["git", "interpret-trailers", "--in-place", "--if-exists", "doNothing", "--trailer",
                    f"{TRAILER}: {session}", message_file], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=seconds, check=False)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except BaseException:  # noqa: BLE001  (fail open: a commit is never blocked by our part)
        os._exit(0)
