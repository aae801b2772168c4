"""A record written before today's redaction keeps its credential until `capture scrub` redacts
it in place. Doctor names the tracked record and the repair; scrub keeps every other byte, renames a file whose
name holds the credential, rewrites a prompt record member by member (with its renderings), and never touches git
history, saying so."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import RunMajordomus

TOKEN = "ghp_" + "R7x2Kq9LmZ4vB8nW3pT6yH1cJ5dF0gA2sE7u"  # the GitHub shape, random-looking


def old_world(repo: Path, run: RunMajordomus) -> tuple[Path, Path]:
    """A closed episode and a prompt, then edited as an older writer would have left them: the token in the
    record's body, in its file name, and in the prompt record's text."""
    start = run("capture", "session", "--provider", "claude-code", "--event", "start", cwd=repo,
                input=json.dumps({"session_id": "old-1", "source": "startup"}).encode())
    assert start.returncode == 0, start.stderr
    prompt = run("capture", "prompt", "--provider", "claude-code", cwd=repo,
                 input=json.dumps({"session_id": "old-1", "prompt": "deploy with the usual token"}).encode())
    assert prompt.returncode == 0, prompt.stderr
    end = run("capture", "session", "--provider", "claude-code", "--event", "end", cwd=repo,
              input=json.dumps({"session_id": "old-1", "reason": "logout"}).encode())
    assert end.returncode == 0, end.stderr
    (session,) = (repo / ".ai/repo/sessions").glob("2*.md")
    planted = session.with_name(session.name.replace("--", f"--{TOKEN}--", 1))
    planted.write_text(session.read_text().replace("title: ", f"title: {TOKEN} ", 1))
    session.unlink()
    (record,) = (repo / ".ai/local/prompts").glob("*.json")
    doc = json.loads(record.read_text())
    doc["text"] = f"deploy with {TOKEN} please"
    record.write_text(json.dumps(doc, indent=2))
    return planted, record


def everything_under(repo: Path) -> list[str]:
    """Every byte and every name under .ai/, as text."""
    out = []
    for path in (repo / ".ai").rglob("*"):
        out.append(str(path.relative_to(repo)))
        if path.is_file():
            out.append(path.read_bytes().decode("utf-8", "replace"))
    return out


def test_doctor_names_a_tracked_record_holding_a_credential_and_scrub_redacts_it_in_place(
        initialised_repo: Path, run_majordomus: RunMajordomus) -> None:
    session, record = old_world(initialised_repo, run_majordomus)
    before = session.read_text()
    doctor = run_majordomus("doctor", "--json", cwd=initialised_repo)
    warns = [json.loads(line) for line in doctor.stdout.decode().splitlines()]
    (warn,) = [f for f in warns if f["level"] == "WARN" and "hold a credential" in f["message"]]
    assert session.name.replace(TOKEN, "[redacted:github-token]") in warn["message"]
    assert "never rewrites git history" in warn["message"]
    assert warn["reproduce"] == "majordomus capture scrub --dry-run"
    assert TOKEN not in doctor.stdout.decode()  # the finding names the file, never the credential

    dry = run_majordomus("capture", "scrub", "--dry-run", cwd=initialised_repo)
    assert dry.returncode == 0, dry.stderr
    assert b"would redact" in dry.stdout and session.exists() and session.read_text() == before

    done = run_majordomus("capture", "scrub", cwd=initialised_repo)
    assert done.returncode == 0, done.stderr
    said = done.stdout.decode()
    assert "renamed to" in said and "commit them" in said and "never rewrites git history" in said
    assert TOKEN not in said + done.stderr.decode()
    assert not [s for s in everything_under(initialised_repo) if TOKEN in s]
    (after,) = (initialised_repo / ".ai/repo/sessions").glob("2*.md")
    assert after.read_text() == before.replace(TOKEN, "[redacted:github-token]")  # every other byte kept
    scrubbed = json.loads(next((initialised_repo / ".ai/local/prompts").glob("*.json")).read_text())
    assert scrubbed["text"] == "deploy with [redacted:github-token] please"
    assert "github-token" in scrubbed["redacted"]
    assert "[redacted:github-token]" in next((initialised_repo / ".ai/local/prompts").glob("*.md")).read_text()
    clean = run_majordomus("doctor", "--json", cwd=initialised_repo)
    assert not [line for line in clean.stdout.decode().splitlines() if '"FAIL"' in line or "credential" in line]

    again = run_majordomus("capture", "scrub", cwd=initialised_repo)
    assert b"nothing changed" in again.stdout
