"""The launcher leaves without the interpreter's finalization, and nothing the hook said or wrote is lost by it.

`majordomus_hook.finish` flushes stdout and stderr, then ends the process with `_exit`: tearing down every module and
object of a run (~1.5 ms of a hook on 3.11) is work for a process about to vanish. These hold what it must keep: the
buffered output arrives, the exit status is the one given, and a run that still needs the orderly exit (an atexit
callback, a thread) gets it; and, through the real `majordomus-hook` script a wired client runs, that a start, a
prompt and an end say their lines and leave every file whole.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import majordomus_hook
from support import MAJORDOMUS_HOOK, records

SRC = str(Path(majordomus_hook.__file__).parent)
# an object whose finalizer says so: it speaks only if the interpreter tears the run down
WITNESS = ("import sys; sys.path.insert(0, sys.argv.pop(1)); import majordomus_hook\n"
           "class Witness:\n"
           "    def __del__(self):\n"
           "        sys.__stderr__.write('finalized')\n"
           "witness = Witness()\n")


def leave(body: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-IS", "-c", WITNESS + body, SRC], capture_output=True, text=True,
                          timeout=60)


def test_finish_flushes_what_was_said_and_skips_the_teardown() -> None:
    done = leave("print('said on stdout', end='')\nsys.stderr.write('said on stderr')\nmajordomus_hook.finish(3)\n")
    assert done.returncode == 3
    assert done.stdout == "said on stdout"  # a pipe is block-buffered: only the flush got it out
    assert done.stderr == "said on stderr"  # and no 'finalized': the teardown was skipped


def test_the_same_run_without_finish_is_torn_down() -> None:
    """The witness does speak when the interpreter finalizes: the test above could fail."""
    done = leave("raise SystemExit(3)\n")
    assert (done.returncode, done.stderr) == (3, "finalized")


def test_an_atexit_callback_gets_the_orderly_exit() -> None:
    done = leave("import atexit\natexit.register(lambda: print('callback ran', end=''))\nmajordomus_hook.finish(4)\n")
    assert (done.returncode, done.stdout, done.stderr) == (4, "callback ran", "finalized")


def test_a_running_thread_gets_the_orderly_exit() -> None:
    done = leave("import threading, time\n"
                 "threading.Thread(target=lambda: (time.sleep(0.2), print('thread finished', end=''))).start()\n"
                 "majordomus_hook.finish(0)\n")
    assert (done.returncode, done.stdout, done.stderr) == (0, "thread finished", "finalized")


def test_a_closed_stdout_costs_nothing() -> None:
    """The client stopped reading: the flush fails, the exit status stands, and no traceback is printed."""
    proc = subprocess.Popen([sys.executable, "-IS", "-c", WITNESS + "import time; time.sleep(0.3)\n"
                             "print('x' * 100, end='')\nmajordomus_hook.finish(5)\n", SRC],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # before the child writes: its flush meets a broken pipe
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 5
    assert "Traceback" not in err and "finalized" not in err, err


def test_a_sitting_through_the_real_launcher_says_its_lines_and_leaves_every_file_whole(
        initialised_repo: Path) -> None:
    sid = "exit-1"
    steps = [(["capture", "session", "--provider", "claude-code", "--event", "start"],
              {"hook_event_name": "SessionStart", "source": "startup"}, "opened"),
             (["capture", "prompt", "--provider", "claude-code"],
              {"hook_event_name": "UserPromptSubmit", "prompt": "refactor module 3 and keep the tests green"},
              "capture prompt: archived as"),
             (["capture", "session", "--provider", "claude-code", "--event", "end"],
              {"hook_event_name": "SessionEnd", "reason": "logout"}, "closed")]
    for args, body, said in steps:
        payload = json.dumps({"session_id": sid, "cwd": str(initialised_repo), **body}).encode()
        done = subprocess.run([sys.executable, "-IS", str(MAJORDOMUS_HOOK), *args], input=payload,
                              capture_output=True, cwd=initialised_repo, timeout=60)
        assert done.returncode == 0, done.stderr.decode()
        assert said in (done.stdout + done.stderr).decode(), (args, done.stdout, done.stderr)
    assert not (initialised_repo / ".ai/local/hook-failures.log").exists()
    [record] = (initialised_repo / ".ai/local/prompts").glob("*.json")
    assert json.loads(record.read_text())["text"] == "refactor module 3 and keep the tests green"
    for rendering in (record.with_suffix(".md"), record.with_suffix(".yaml")):
        assert "refactor module 3" in rendering.read_text()
    [closed] = records(initialised_repo).values()
    assert (closed["outcome"], closed["end_reason"]) == ("closed", "logout")
    assert not list((initialised_repo / ".ai/local/state/sessions-open").glob("*.yaml"))
