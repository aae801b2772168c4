"""majordomus-hook's work: how a coding client runs majordomus's hooks (`capture session …`, `capture prompt …`).

It fails open. Whatever goes wrong — the package will not import, the command crashes or exits non-zero — the
client gets exit 0 and nothing on stdout, which every client reads as "no opinion" (exit 2 would block the
person's prompt in Claude Code and Gemini CLI), and the failure becomes one line in `.ai/local/hook-failures.log`,
which `majordomus doctor` reports with the repair. It imports nothing before majordomus: it runs on every prompt
a person types (not even `os`: majordomus.lean says why).

A module of its own at the top of site-packages, beside `majordomus/` rather than in it, so that a package broken
at its root (a half-finished upgrade) still has its failure logged; and a module rather than the script, because
a script is compiled from source on every run (~0.5 ms for this one) while a module's bytecode is cached. The
script `majordomus-hook` (scripts/) only finds this module, calls `main`, and ends the process with `finish`.
"""

import sys

LOG = "hook-failures.log"  # under .ai/local/
LOG_LIMIT = 1 << 20  # past a MiB the log says enough; a hook never grows it further
TEXT_LIMIT = 300


def _root(argv: list[str]) -> str | None:
    """The worktree whose `.ai/local/` takes the line: `--repo`, else the nearest folder up from here that has one."""
    import os  # a failure is being logged: `os` only now (under -IS a hook that works never imports it)

    if len(argv) > 1 and argv[0] == "--repo":
        return argv[1]
    for arg in argv[:1]:
        if arg.startswith("--repo="):
            return arg[len("--repo="):]
    here = os.getcwd()
    while True:
        if os.path.isdir(os.path.join(here, ".ai", "local")):
            return here
        up = os.path.dirname(here)
        if up == here:
            return None
        here = up


def log_failure(argv: list[str], text: str) -> None:
    """One line in `.ai/local/hook-failures.log` (0600), never through a link; silent when there is no layer."""
    root = _root(argv)
    if root is None:
        return
    import os
    import time

    ai = os.path.join(root, ".ai")
    local = os.path.join(ai, "local")
    if os.path.islink(ai) or os.path.islink(local) or not os.path.isdir(local):
        return  # majordomus never writes through a link in .ai/
    words = " ".join(w for w in argv if not w.startswith("-") or w in ("--provider", "--event"))[:80]
    line = f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {words}: {text[:TEXT_LIMIT]}\n"
    try:
        fd = os.open(os.path.join(local, LOG), os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError:
        return
    try:
        os.fchmod(fd, 0o600)
        if os.fstat(fd).st_size < LOG_LIMIT:
            os.write(fd, line.replace("\r", " ").encode("utf-8", "replace"))
    except OSError:
        pass
    finally:
        os.close(fd)


def _where(exc: BaseException) -> str:
    """The innermost frame of majordomus's own code: where it failed, never what it held (a payload's values)."""
    import os

    tb = exc.__traceback__
    where = ""
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename
        if "majordomus" in name:
            where = f"{os.path.basename(name)}:{tb.tb_lineno}"
        tb = tb.tb_next
    return where or "?"


def _site() -> None:
    """What -S left out: the environment's .pth files, and the user's site-packages for a --user install."""
    for name in [n for n in sys.modules if n == "majordomus" or n.startswith("majordomus.")
                 or getattr(sys.modules[n], "__lean__", False)]:
        del sys.modules[name]  # a namespace package found half-way, say: the import starts over (and `site`
        # gets the standard os, not majordomus.lean's stand-in)
    import site

    site.main()
    if sys.prefix == sys.base_prefix:  # not a virtualenv: a pip install --user may be where majordomus is
        site.addsitedir(site.getusersitepackages())


def main(argv: list[str]) -> int:
    try:
        try:
            from majordomus.lean import enter

            enter()  # the hook's fast path: majordomus/lean/__init__.py says what, and why
            from majordomus.cli import main as run
        except ImportError:
            if "site" in sys.modules:
                raise
            _site()
            from majordomus.cli import main as run
    except BaseException as exc:  # noqa: BLE001 - a broken install must cost the person nothing
        log_failure(argv, f"majordomus cannot be imported ({type(exc).__name__}: {exc}); reinstall it "
                          "(pipx reinstall majordomus, uv tool install --reinstall majordomus, or pip install "
                          "--force-reinstall majordomus), then run majordomus doctor")
        return 0
    try:
        code = run(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException as exc:  # noqa: BLE001 - the same: the hook fails open
        log_failure(argv, f"the hook crashed ({type(exc).__name__} at {_where(exc)}); run majordomus doctor, and "
                          "report it with that line")
        return 0
    if code:
        log_failure(argv, f"exited {code} (what it said is in the hook's own log, or run the command by hand); "
                          "the client was told 0")
    return 0


def finish(code: int) -> None:
    """End the process once the hook's work is done: flush what it said, then leave without the interpreter's
    finalization, which on 3.11 costs a hook ~1.5 ms (every module, function and object of the run torn down one by
    one, for a process that is about to vanish) while the client waits for it to exit.

    Every write of the hook path is finished before `main` returns (os.write on descriptors, files closed by
    `with`, git reaped), and the operating system releases descriptors and locks at exit. What would still need
    the orderly exit — a thread, or an atexit callback (weakref.finalize, logging, tempfile) — gets it."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except Exception:  # noqa: BLE001 - the client stopped reading (a broken pipe): nothing more to tell it
            pass
    import atexit

    pending = getattr(atexit, "_ncallbacks", None)
    if "threading" in sys.modules or pending is None or pending():
        raise SystemExit(code)
    import posix

    posix._exit(code)
