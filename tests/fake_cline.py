"""A fake Cline CLI: a real process that keeps its session file and runs its hooks as the cline CLI 3.0.65 does.

What it copies (observed offline with the pinned CLI, tests/real_clients/test_cline.py): the session file
`~/.cline/data/sessions/<id>/<id>.json` is written when the session starts, with the process's `pid`, status
`running` and `prompt` (the task's first message, wrapped as the terminal UI wraps it) before TaskStart runs; the
messages file stays empty until a run ends; a run's end writes the messages and status `idle`; leaving in order
writes status `completed`, `exit_code` 0 and `ended_at`. Its hooks run through `sh -c`, as Cline's run through their
shebang, so the hook names this process as its client. It reads commands on stdin, one a line:
`run <text>` (a task's run: TaskStart, or TaskResume after `resume`), `prompt <text>` (UserPromptSubmit),
`resume` (the next run resumes the session), `quit` (leave in order); end of input leaves without a word.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent(r"""
    import json, os, subprocess, sys, time
    session, data = sys.argv[1], sys.argv[2]
    folder = os.path.join(data, session)
    os.makedirs(folder, exist_ok=True)
    manifest = os.path.join(folder, session + ".json")
    messages_path = os.path.join(folder, session + ".messages.json")
    def now():
        return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + ".%03dZ" % (time.time_ns() // 1000000 % 1000)
    state = json.load(open(manifest)) if os.path.exists(manifest) else {
        "version": 1, "session_id": session, "source": "cli", "pid": os.getpid(), "started_at": now(),
        "status": "idle", "interactive": True, "messages_path": messages_path}
    messages = json.load(open(messages_path))["messages"] if os.path.exists(messages_path) else []
    def save():
        with open(manifest, "w") as f:
            json.dump(state, f)
    def save_messages():
        with open(messages_path, "w") as f:
            json.dump({"version": 1, "sessionId": session, "messages": messages}, f)
    def hook(args, name, **extra):
        payload = {"clineVersion": "", "timestamp": now(), "taskId": "conv_1", "hookName": name,
                   "sessionContext": {"rootSessionId": session}, **extra}
        subprocess.run(["sh", "-c", "majordomus capture " + args], input=json.dumps(payload).encode(),
                       capture_output=True, check=True)
    save()
    if not messages:
        save_messages()
    resumed = False
    for line in sys.stdin:
        word, _, text = line.rstrip("\n").partition(" ")
        if word == "run":
            wrapped = '<user_input mode="act">' + text + "</user_input>"
            state.update(status="running", prompt=state.get("prompt") or wrapped)
            state.pop("ended_at", None); state.pop("exit_code", None)
            save()
            if resumed:
                hook("session --provider cline --event start", "agent_resume", taskResume={})
            else:
                hook("session --provider cline --event start", "agent_start", taskStart={"taskMetadata": {}})
            messages.append({"id": "u%d" % len(messages), "role": "user", "ts": int(time.time() * 1000),
                             "content": [{"type": "text", "text": wrapped}]})
            messages.append({"id": "a%d" % len(messages), "role": "assistant", "ts": int(time.time() * 1000),
                             "content": [{"type": "text", "text": "All done."}]})
            save_messages()
            state["status"] = "idle"
            save()
            hook("session --provider cline --event turn", "agent_end", turn={"status": "completed"})
        elif word == "prompt":
            hook("prompt --provider cline", "prompt_submit", userPromptSubmit={"prompt": text, "attachments": []})
        elif word == "resume":
            resumed = True
        elif word == "quit":
            state.update(status="completed", exit_code=0, ended_at=now())
            save()
            break
        print("ok", flush=True)
""")


class FakeCline:
    """One sitting of the fake Cline in `repo`, keeping its session files under `data` (Cline's sessions folder)."""

    def __init__(self, repo: Path, session: str, data: Path) -> None:
        self.session = session
        self.data = data
        self.process = subprocess.Popen([sys.executable, "-c", SCRIPT, session, str(data)], cwd=repo,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True)

    @property
    def manifest(self) -> Path:
        return self.data / self.session / f"{self.session}.json"

    def say(self, line: str) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline()
        assert answer == "ok\n", (answer, self.process.stderr.read() if self.process.stderr else "")

    def run(self, text: str) -> None:
        self.say(f"run {text}")

    def quit(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write("quit\n")
        self.process.stdin.close()
        assert self.process.wait(timeout=30) == 0, self.process.stderr.read() if self.process.stderr else ""

    def leave_without_a_word(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(timeout=30)
