"""`capture prompt` through the installed executable: admission, the person filter, strict resolution, privacy."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from clients.samples import PROMPT_PROVIDERS, SAMPLES, WITHOUT_PROMPT_ROW
from support import MAJORDOMUS, open_files

PROMPTS = Path(".ai/local/prompts")
HEAVY = ("yaml", "starlette", "uvicorn", "anyio", "pydantic", "httpx", "mcp", "h11", "click", "asyncio")


def prompt(run_majordomus, repo: Path, payload: object, provider: str = "claude-code", raw: bytes | None = None):
    data = raw if raw is not None else json.dumps(payload).encode()
    return run_majordomus("capture", "prompt", "--provider", provider, cwd=repo, input=data)


def start(run_majordomus, repo: Path, ps: str, provider: str = "claude-code"):
    done = run_majordomus("capture", "session", "--provider", provider, "--event", "start", cwd=repo,
                          input=json.dumps({"session_id": ps, "source": "startup"}).encode())
    assert done.returncode == 0, done.stderr
    return done


def records(repo: Path) -> dict[str, dict]:
    return {p.name: json.loads(p.read_text()) for p in sorted((repo / PROMPTS).glob("*.json"))}


def capture_log(repo: Path) -> str:
    path = repo / PROMPTS / ".capture.log"
    return path.read_text() if path.exists() else ""


def test_a_prompt_of_an_open_episode_names_it_and_says_open(initialised_repo: Path, run_majordomus) -> None:
    start(run_majordomus, initialised_repo, "ps-1")
    episode = next(iter(open_files(initialised_repo).values()))
    done = prompt(run_majordomus, initialised_repo, {"session_id": "ps-1", "prompt_id": "u-1",
                                                     "prompt": "Refactor the parser", "cwd": str(initialised_repo)})
    assert done.returncode == 0 and done.stdout == b"", done.stderr
    (name, record), = records(initialised_repo).items()
    assert name.endswith("-refactor-the-parser.json") and len(name.split("-", 1)[0]) == 14
    assert list(record) == ["schema", "started_at", "provider", "event", "id", "session", "episode", "episode_link",
                            "repository_id", "worktree_id", "source", "cwd", "branch", "head", "text"]
    assert record["episode"] == episode["session_id"] and record["episode_link"] == "open"
    assert record["event"] == "UserPromptSubmit" and record["id"] == "u-1" and record["session"] == "ps-1"
    assert record["branch"] == "main" and len(record["head"]) == 40 and record["text"] == "Refactor the parser"
    assert record["repository_id"] == episode["repository_id"] and record["worktree_id"] == episode["worktree_id"]


def test_a_prompt_of_an_unknown_provider_session_is_an_orphan(initialised_repo: Path, run_majordomus) -> None:
    start(run_majordomus, initialised_repo, "someone-else")
    prompt(run_majordomus, initialised_repo, {"session_id": "nobody", "prompt": "hello"})
    prompt(run_majordomus, initialised_repo, {"prompt": "no session at all"})
    found = records(initialised_repo)
    assert len(found) == 2  # both archived, neither joined to the episode that is open
    for record in found.values():
        assert record["episode"] is None and record["episode_link"] == "orphan"


def test_resolution_never_falls_back_to_the_environment_or_the_pointer(initialised_repo: Path, run_majordomus) -> None:
    start(run_majordomus, initialised_repo, "the-open-one")
    assert (initialised_repo / ".ai/local/state/session-current.yaml").exists()
    env = {"CLAUDE_CODE_SESSION_ID": "the-open-one", "MAJORDOMUS_PROVIDER_SESSION": "the-open-one"}
    done = run_majordomus("capture", "prompt", "--provider", "claude-code", cwd=initialised_repo, env=env,
                          input=json.dumps({"session_id": "another", "prompt": "whose is this"}).encode())
    assert done.returncode == 0
    (record,) = records(initialised_repo).values()
    assert record["episode"] is None and record["episode_link"] == "orphan"


def test_the_provider_session_goes_through_the_one_sanitizer(initialised_repo: Path, run_majordomus) -> None:
    odd = "a/b:c@d ../e"
    start(run_majordomus, initialised_repo, odd)
    prompt(run_majordomus, initialised_repo, {"session_id": odd, "prompt": "odd key"})
    (record,) = records(initialised_repo).values()
    assert record["episode_link"] == "open" and record["session"] == odd


def test_a_captured_prompt_refreshes_the_episodes_last_activity(initialised_repo: Path, run_majordomus) -> None:
    start(run_majordomus, initialised_repo, "ps-touch")
    path = next((initialised_repo / ".ai/local/state/sessions-open").glob("*.yaml"))
    text = path.read_text().replace(yaml.safe_load(path.read_text())["last_activity_at"], "2000-01-01T00:00:00Z")
    path.write_text(text)
    prompt(run_majordomus, initialised_repo, {"session_id": "ps-touch", "prompt": "still here"})
    assert yaml.safe_load(path.read_text())["last_activity_at"] > "2020"


@pytest.mark.parametrize("provider", PROMPT_PROVIDERS)
def test_every_declared_prompt_adapter_archives_its_clients_payload(initialised_repo: Path, run_majordomus,
                                                                    provider) -> None:
    sample = SAMPLES[provider]
    done = prompt(run_majordomus, initialised_repo, sample["prompt"], provider=provider)
    assert done.returncode == 0, done.stderr
    (record,) = records(initialised_repo).values()
    expected = sample["archived"]
    assert record["provider"] == provider and record["event"] == expected["event"]
    assert record["text"] == expected["text"] and record["session"] == expected["session"]
    assert record["id"] == expected.get("id")
    assert capture_log(initialised_repo) == ""


def test_admission_failures_exit_12(initialised_repo: Path, run_majordomus, tmp_path: Path) -> None:
    body = {"session_id": "s", "prompt": "x"}
    unknown = prompt(run_majordomus, initialised_repo, body, provider="nope")
    assert unknown.returncode == 12 and b"unknown provider 'nope'" in unknown.stderr
    no_adapter = prompt(run_majordomus, initialised_repo, body, provider=WITHOUT_PROMPT_ROW[0])
    assert no_adapter.returncode == 12 and b"no prompt adapter" in no_adapter.stderr
    other = tmp_path / "plain"
    other.mkdir()
    subprocess.run(["git", "init", "-q", str(other)], check=True)
    assert prompt(run_majordomus, other, body).returncode == 12  # a repository without the layer
    outside = tmp_path / "not-a-repo"
    outside.mkdir()
    assert prompt(run_majordomus, outside, body).returncode == 12
    assert not records(initialised_repo)


VALUE = "VALUE-hunter2-xyz"


@pytest.mark.parametrize(("raw", "expect"), [
    (f"this is not json {VALUE}".encode(), "not JSON"),
    (f'["an", "{VALUE}"]'.encode(), "JSON array, not an object"),
    (f'{{"prompt": ["{VALUE}"], "session_id": "s", "secretkey": "{VALUE}"}}'.encode(),
     "key prompt is a JSON array, not a string"),
    (f'{{"prompt": null, "session_id": "{VALUE}"}}'.encode(), "key prompt is a JSON null, not a string"),
    (f'{{"session_id": "s", "tool_input": "{VALUE}"}}'.encode(), "none of the text keys (prompt, prompt_text, text)"),
    (b'{"prompt": "\xff\xfe VALUE-hunter2-xyz"}', "not UTF-8"),
    (b"", "the payload is empty"),
])
def test_a_malformed_payload_is_logged_by_key_names_only_and_exits_0(initialised_repo: Path, run_majordomus,
                                                                      raw, expect) -> None:
    done = prompt(run_majordomus, initialised_repo, None, raw=raw)
    assert done.returncode == 0 and done.stdout == b""
    log = capture_log(initialised_repo)
    assert expect in log, log
    assert VALUE not in log and "hunter2" not in done.stderr.decode()
    if b"secretkey" in raw:
        assert "keys: prompt, session_id, secretkey" in log  # key names are what the log is for
    assert not records(initialised_repo)


def test_a_payload_over_16_mib_is_logged_not_parsed(initialised_repo: Path, run_majordomus) -> None:
    raw = json.dumps({"prompt": "x" * (16 * 1024 * 1024 + 10)}).encode()
    done = prompt(run_majordomus, initialised_repo, None, raw=raw)
    assert done.returncode == 0
    assert "over 16 MiB" in capture_log(initialised_repo) and not records(initialised_repo)


@pytest.mark.parametrize("text", ["<system-reminder>be brief</system-reminder>",
                                  "  <command-name>/clear</command-name>",
                                  "<task-notification>done</task-notification>", "<local-command-stdout>ok"])
def test_injected_messages_are_not_archived_and_not_logged(initialised_repo: Path, run_majordomus, text) -> None:
    done = prompt(run_majordomus, initialised_repo, {"session_id": "s", "prompt": text})
    assert done.returncode == 0 and b"injected" in done.stderr
    assert not records(initialised_repo) and capture_log(initialised_repo) == ""


def test_a_source_that_is_not_the_person_is_not_archived(initialised_repo: Path, run_majordomus) -> None:
    prompt(run_majordomus, initialised_repo, {"session_id": "s", "prompt": "from a hook", "prompt_source": "hook"})
    assert not records(initialised_repo)
    prompt(run_majordomus, initialised_repo, {"session_id": "s", "prompt": "typed", "prompt_source": "user"})
    assert [r["source"] for r in records(initialised_repo).values()] == ["user"]


def test_capture_is_idempotent_on_the_prompt_id(initialised_repo: Path, run_majordomus) -> None:
    body = {"session_id": "s", "prompt_id": "same-id", "prompt": "only once"}
    first = prompt(run_majordomus, initialised_repo, body)
    again = prompt(run_majordomus, initialised_repo, {**body, "prompt": "a redelivery"})
    assert first.returncode == again.returncode == 0 and b"already" in again.stderr
    assert len(records(initialised_repo)) == 1
    prompt(run_majordomus, initialised_repo, {**body, "prompt_id": "other-id"})
    prompt(run_majordomus, initialised_repo, {"session_id": "s", "prompt": "no id twice"})
    prompt(run_majordomus, initialised_repo, {"session_id": "s", "prompt": "no id twice"})
    assert len(records(initialised_repo)) == 4  # without an id nothing says two prompts are one


def test_a_name_clash_takes_the_next_suffix_and_never_drops_a_prompt(initialised_repo: Path, run_majordomus) -> None:
    for n in range(6):
        prompt(run_majordomus, initialised_repo, {"session_id": "s", "prompt": f"Same opening {'!' * n}"})
    stems = {name[15:-5] for name in records(initialised_repo)}
    texts = sorted(r["text"] for r in records(initialised_repo).values())
    assert len(texts) == 6 and texts == sorted(f"Same opening {'!' * n}" for n in range(6))
    for stem in stems:
        assert stem.startswith("same-opening")
    for name in records(initialised_repo):
        assert (initialised_repo / PROMPTS / name.replace(".json", ".md")).is_file()
        assert (initialised_repo / PROMPTS / name.replace(".json", ".yaml")).is_file()


def test_redaction_happens_before_the_slug_record_renderings_and_log(initialised_repo: Path, run_majordomus) -> None:
    key = "sk-proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"
    prompt(run_majordomus, initialised_repo, {"session_id": "s", "prompt": f"{key} is my key, use it",
                                              "cwd": f"/home/x/{key}"})
    prompt(run_majordomus, initialised_repo, None, raw=f'{{"session_id": "s", "{key}": 1}}'.encode())
    (name, record), = records(initialised_repo).items()
    assert record["redacted"] == "openai-key" and record["text"].startswith("[redacted:openai-key] is my key")
    assert name.endswith("-redacted-openai-key-is-my-key-use-it.json")
    for path in (initialised_repo / ".ai").rglob("*"):
        assert key not in path.name
        if path.is_file():
            assert key not in path.read_text(errors="replace"), path


def test_modes_are_private_whatever_the_umask(initialised_repo: Path) -> None:
    archive = initialised_repo / PROMPTS
    os.chmod(archive, 0o755)
    payload = json.dumps({"session_id": "s", "prompt": "umask zero"})
    subprocess.run(["sh", "-c", f"umask 000; exec '{MAJORDOMUS}' capture prompt --provider claude-code"],
                   cwd=initialised_repo, input=payload.encode(), check=True, capture_output=True)
    assert stat.S_IMODE(archive.stat().st_mode) == 0o700
    files = list(archive.iterdir())
    assert len(files) == 3
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


def test_a_symlinked_archive_directory_is_refused_not_followed(initialised_repo: Path, run_majordomus,
                                                               tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    archive = initialised_repo / PROMPTS
    archive.rmdir()
    archive.symlink_to(elsewhere)
    done = prompt(run_majordomus, initialised_repo, {"session_id": "s", "prompt": "where does this go"})
    assert done.returncode == 13 and b"symbolic link" in done.stderr
    assert list(elsewhere.iterdir()) == []


def test_a_symlink_under_a_records_name_is_skipped_not_followed(initialised_repo: Path, run_majordomus,
                                                                tmp_path: Path) -> None:
    target = tmp_path / "target.json"
    target.write_text("untouched")
    from datetime import datetime, timezone

    archive = initialised_repo / PROMPTS
    for delta in range(0, 3):  # cover the seconds the capture can land in
        stamp = datetime.fromtimestamp(datetime.now(timezone.utc).timestamp() + delta, timezone.utc)
        (archive / f"{stamp:%Y%m%d%H%M%S}-linked-name.json").symlink_to(target)
    done = prompt(run_majordomus, initialised_repo, {"session_id": "s", "prompt": "linked name"})
    assert done.returncode == 0, done.stderr
    assert target.read_text() == "untouched"
    made = [p for p in archive.glob("*.json") if not p.is_symlink()]
    assert len(made) == 1 and made[0].name.endswith("-linked-name-2.json")


def test_the_prompt_hook_imports_the_standard_library_only(initialised_repo: Path) -> None:
    start_payload = json.dumps({"session_id": "imp", "source": "startup"})
    subprocess.run([str(MAJORDOMUS), "capture", "session", "--provider", "claude-code", "--event", "start"],
                   cwd=initialised_repo, input=start_payload.encode(), check=True, capture_output=True)
    probe = ("import sys, io, json\n"
             "sys.stdin = io.TextIOWrapper(io.BytesIO(sys.argv[1].encode()))\n"
             "from majordomus.cli import main\n"
             "code = main(sys.argv[2:])\n"
             "print(json.dumps([code, sorted(sys.modules)]))\n")
    payload = json.dumps({"session_id": "imp", "prompt_id": "i-1", "prompt": "my password=Zx81kdjQm2hf7Kp0aa"})
    done = subprocess.run([sys.executable, "-c", probe, payload, "--repo", str(initialised_repo), "capture", "prompt",
                           "--provider", "claude-code"], capture_output=True, text=True, check=True)
    code, loaded = json.loads(done.stdout.splitlines()[-1])
    assert code == 0, done.stderr
    assert "majordomus.redact" in loaded and "majordomus.archive.capture" in loaded
    heavy = sorted(m for m in loaded if m.split(".")[0] in HEAVY)
    assert heavy == []
    assert not any(m.startswith(("majordomus.mcp", "majordomus.capabilities")) for m in loaded)


def test_every_example_of_the_credential_table_is_redacted_by_the_executable(initialised_repo: Path,
                                                                            run_majordomus) -> None:
    table = json.loads((Path(__file__).parents[2] / "src/majordomus/archive/redact_rules.json").read_text())
    texts, expected = [], []
    for row in table["rules"]:
        for example in row["examples"]:
            texts.append(example["text"])
            expected.append(example["text"].replace(example["secret"], f"[redacted:{row['name']}]", 1))
    text = "Please keep these safe:\n\n" + "\n\n".join(texts)
    done = prompt(run_majordomus, initialised_repo, {"session_id": "s", "prompt": text})
    assert done.returncode == 0, done.stderr
    (name, record), = records(initialised_repo).items()
    assert record["text"] == "Please keep these safe:\n\n" + "\n\n".join(expected)
    assert record["redacted"] == ",".join(sorted(row["name"] for row in table["rules"]))
    for example in (e for row in table["rules"] for e in row["examples"]):
        for path in (initialised_repo / ".ai").rglob("*"):
            assert example["secret"] not in path.name
            if path.is_file():
                assert example["secret"] not in path.read_text(errors="replace"), path
