"""The prompt archive end to end through the installed `majordomus`: a history of several episodes, then
reconcile, prune, render and doctor, asserting every link and every refusal."""

from __future__ import annotations

import json
import os
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest
import yaml

from support import records as session_records

PROMPTS = Path(".ai/local/prompts")

# what reconcile and prune say of the one record they refuse: how many, which, and why
REFUSED_ODD = (", 1 refused (this writer cannot account for every member): 20251102000000-legacy-odd.json "
               "(the first has member(s) this writer does not know: tokens)")


def now_second() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def next_second() -> None:
    """Wait (with a deadline) until the UTC second changes: windows that share no second are unambiguous."""
    first = now_second()
    deadline = time.monotonic() + 3
    while now_second() == first:
        assert time.monotonic() < deadline, "the clock did not move"
        time.sleep(0.02)


class Client:
    def __init__(self, run_majordomus, repo: Path) -> None:
        self.run, self.repo = run_majordomus, repo

    def session(self, provider: str, event: str, ps: str, **extra: object) -> str:
        done = self.run("capture", "session", "--provider", provider, "--event", event, cwd=self.repo,
                        input=json.dumps({"session_id": ps, **extra}).encode())
        assert done.returncode == 0 and done.stdout == b"", done.stderr
        return done.stderr.decode().strip()

    def prompt(self, provider: str, payload: dict) -> str:
        done = self.run("capture", "prompt", "--provider", provider, cwd=self.repo, input=json.dumps(payload).encode())
        assert done.returncode == 0 and done.stdout == b"", done.stderr
        line = done.stderr.decode().strip()
        assert "archived as" in line, line
        return line.split("archived as ", 1)[1].split(" ", 1)[0].rsplit("/", 1)[1]

    def cli(self, *args: str) -> tuple[int, str]:
        done = self.run(*args, cwd=self.repo)
        return done.returncode, done.stdout.decode() + done.stderr.decode()

    def record(self, name: str) -> dict:
        return json.loads((self.repo / PROMPTS / name).read_text())


def opened_id(line: str) -> str:
    return line.split()[1]


def legacy(repo: Path, name: str, *, started_at: str, session: str | None, provider: str = "claude-code",
           one_line: bool = False, text: str = "a legacy prompt", **extra: object) -> str:
    """A record as the earlier writer left it: no provenance and no identity, the root path instead."""
    record = {"schema": "majordomus.capture/v1", "started_at": started_at, "provider": provider,
              "event": "UserPromptSubmit", "id": None, "session": session, "source": None, "cwd": str(repo),
              "repository": str(repo), "branch": "main", "head": "NONE", "text": text, **extra}
    raw = json.dumps(record) if one_line else json.dumps(record, indent=2)
    path = repo / PROMPTS / name
    path.write_text(raw + "\n")
    os.chmod(path, 0o600)
    return name


def doctor_lines(c: Client) -> list[str]:
    _, out = c.cli("doctor")
    return [line for line in out.splitlines() if " prompts " in line or " capture " in line]


@pytest.mark.slow
def test_a_multi_episode_history_is_linked_on_evidence_pruned_rendered_and_reported(initialised_repo: Path,
                                                                                    run_majordomus) -> None:
    """1. claude-code opens A (ps alpha); P1 is typed in it; P2 comes from a session nobody opened.
    2. A ends on purpose; P3 arrives under alpha after the close; alpha resumes as A2; P4 is typed in it.
    3. codex opens B, P5 is typed, B ends. gemini opens C and ends it; C's working context is then lost.
    4. Legacy records: L1 (alpha, inside A, one-line), L2 (an unknown session inside C), L3 (alpha, between
       A and A2), L4 (no session, a year old), L5 (a member no writer knows).
    Result: reconcile links L1 by its working context and L2 by the ledger tier, leaves P2, P3, L3, L4
    unlinked with their provenance, refuses L5; prune takes L4's body by age and the oldest by bytes;
    render repairs modes and renderings; doctor reports each state as it is."""
    c = Client(run_majordomus, initialised_repo)
    a = opened_id(c.session("claude-code", "start", "alpha", source="startup"))
    next_second()
    p1 = c.prompt("claude-code", {"session_id": "alpha", "prompt_id": "u-1", "prompt": "Plan the parser rewrite"})
    p2 = c.prompt("claude-code", {"session_id": "nobody", "prompt": "A prompt from a window with no episode"})
    t_in_a = c.record(p1)["started_at"]
    next_second()
    closed = c.session("claude-code", "end", "alpha", reason="prompt_input_exit")
    assert closed.startswith("episode closed (closed, reason prompt_input_exit) into .ai/repo/sessions/")
    next_second()
    p3 = c.prompt("claude-code", {"session_id": "alpha", "prompt": "Typed after the close"})
    t_gap = c.record(p3)["started_at"]
    next_second()
    a2 = opened_id(c.session("claude-code", "start", "alpha", source="resume"))
    assert a2 != a
    p4 = c.prompt("claude-code", {"session_id": "alpha", "prompt_id": "u-4", "prompt": "Back again"})
    b = opened_id(c.session("codex", "start", "thread-1", source="startup"))
    p5 = c.prompt("codex", {"session_id": "thread-1", "turn_id": "t-5", "prompt": "Codex, run the tests"})
    c.session("codex", "end", "thread-1", reason="other")
    next_second()
    cid = opened_id(c.session("gemini", "start", "g-1", source="startup"))
    next_second()
    t_in_c = now_second()
    next_second()
    c.session("gemini", "end", "g-1", reason="exit")
    (context,) = (initialised_repo / ".ai/local/session-contexts").glob(f"*--{cid}.md")
    context.unlink()  # only C's closed record is left to say when it was open

    assert (c.record(p1)["episode"], c.record(p1)["episode_link"]) == (a, "open")
    assert (c.record(p2)["episode"], c.record(p2)["episode_link"]) == (None, "orphan")
    assert (c.record(p3)["episode"], c.record(p3)["episode_link"]) == (None, "orphan")
    assert (c.record(p4)["episode"], c.record(p4)["episode_link"]) == (a2, "open")
    assert (c.record(p5)["episode"], c.record(p5)["episode_link"]) == (b, "open")

    def stamp(rfc: str) -> str:
        return rfc.replace("-", "").replace(":", "").replace("T", "").replace("Z", "")

    l1 = legacy(initialised_repo, f"{stamp(t_in_a)}-legacy-in-a.json", started_at=t_in_a, session="alpha",
                one_line=True)
    l2 = legacy(initialised_repo, f"{stamp(t_in_c)}-legacy-in-c.json", started_at=t_in_c, session="lost-ps",
                provider="gemini")
    l3 = legacy(initialised_repo, f"{stamp(t_gap)}-legacy-gap.json", started_at=t_gap, session="alpha")
    l4 = legacy(initialised_repo, "20251101000000-legacy-old.json", started_at="2025-11-01T00:00:00Z", session=None,
                text="a year-old body")
    l5 = legacy(initialised_repo, "20251102000000-legacy-odd.json", started_at="2025-11-02T00:00:00Z",
                session="alpha", tokens={"in": 3})
    for name in (l1, l2, l3, l4):
        (initialised_repo / PROMPTS / name.replace(".json", ".md")).write_text("stale\n")
        (initialised_repo / PROMPTS / name.replace(".json", ".yaml")).write_text("stale: true\n")
        os.chmod(initialised_repo / PROMPTS / name.replace(".json", ".md"), 0o600)
        os.chmod(initialised_repo / PROMPTS / name.replace(".json", ".yaml"), 0o600)

    before = doctor_lines(c)
    assert any(line.startswith("FAIL prompts") and "4 record(s) say nothing about which episode they belong to"
               in line and line.endswith("[reproduce: majordomus capture reconcile]") for line in before), before
    assert any("1 file(s) under a record's name are not records" in line for line in before), before

    code, out = c.cli("capture", "reconcile", "--dry-run")
    assert code == 0
    assert out.strip() == ("reconcile --dry-run: 10 record(s); 2 would be linked, 3 already linked, 4 have no "
                           "evidence and stay unlinked" + REFUSED_ODD)
    assert "episode_link" not in c.record(l1)
    code, out = c.cli("capture", "reconcile")
    assert out.strip() == ("reconcile: 10 record(s); 2 linked, 3 already linked, 4 unlinked for want of evidence"
                           + REFUSED_ODD)
    expect = {p1: (a, "open"), p2: (None, "orphan"), p3: (None, "orphan"), p4: (a2, "open"), p5: (b, "open"),
              l1: (a, "session-context"), l2: (cid, "ledger"), l3: (None, "unlinked-legacy"),
              l4: (None, "unlinked-legacy")}
    for name, link in expect.items():
        got = c.record(name)
        assert (got["episode"], got["episode_link"]) == link, name
        rendered = yaml.safe_load((initialised_repo / PROMPTS / name.replace(".json", ".yaml")).read_text())
        assert (rendered["episode"], rendered["episode_link"]) == link, name
    assert c.record(l1)["worktree_id"] == c.record(p1)["worktree_id"]
    assert c.record(l1)["repository_id"] == c.record(p1)["repository_id"]
    assert "tokens" in c.record(l5) and "episode_link" not in c.record(l5)  # refused: untouched
    code, out = c.cli("capture", "reconcile")
    assert out.startswith("reconcile: 10 record(s); 0 linked, 5 already linked, 4 unlinked")
    ledger = [json.loads(x) for x in (initialised_repo / ".ai/local/state/ledger.jsonl").read_text().splitlines()]
    rec_lines = [e for e in ledger if e["event"] == "prompts.reconciled"]
    assert [(e["records"], e["linked"], e["unlinked"], e["refused"]) for e in rec_lines] == [(10, 2, 4, 1),
                                                                                            (10, 0, 4, 1)]
    after = doctor_lines(c)
    assert ("OK   prompts     .ai/local/prompts — 9 record(s) each name their episode or say why they cannot: "
            "5 linked, 4 unlinked with their provenance recorded") in after, after

    # retention: age first (L4), then the oldest bodies until the rest fit the cap
    policy = initialised_repo / ".ai/repo/policy.yaml"
    policy.write_text(policy.read_text().replace("retention_max_days: 90", "retention_max_days: 30"))
    assert any("1 prompt body(ies) are older than the 30 day(s) the policy allows  [reproduce: majordomus capture "
               "prune]" in line for line in doctor_lines(c))
    code, out = c.cli("capture", "prune", "--dry-run")
    assert code == 0 and "1 would be pruned" in out and c.record(l4)["text"] == "a year-old body"
    code, out = c.cli("capture", "prune")
    assert code == 0 and out.startswith("prune: 10 record(s); 1 body(ies) pruned"), out
    assert out.rstrip().endswith(REFUSED_ODD)
    old = c.record(l4)
    assert old["text"] is None and old["pruned_bytes"] == len("a year-old body") and old["episode_link"] == \
        "unlinked-legacy"
    md = (initialised_repo / PROMPTS / l4.replace(".json", ".md")).read_text()
    assert f"(the body was pruned by retention on {old['pruned_at']}; it was 15 byte(s); sha256 " \
           f"{old['pruned_sha256']})" in md
    bodies = {n: c.record(n)["text"] for n in expect if c.record(n)["text"] is not None}
    total = sum(len(t.encode()) for t in bodies.values())
    oldest = min(bodies)
    policy.write_text(policy.read_text().replace("retention_max_bytes: 52428800",
                                                 f"retention_max_bytes: {total - 1}"))
    code, out = c.cli("capture", "prune")
    assert out.startswith("prune: 10 record(s); 1 body(ies) pruned"), out
    assert c.record(oldest)["text"] is None
    assert sorted(p.name for p in (initialised_repo / PROMPTS).glob("*.json")) == sorted([*expect, l5])
    assert not any("retention" in line and "FAIL" in line for line in doctor_lines(c))

    # privacy: a widened file and a lost rendering, repaired by render over the whole directory
    os.chmod(initialised_repo / PROMPTS / p2, 0o644)
    (initialised_repo / PROMPTS / p3.replace(".json", ".yaml")).unlink()
    lines = doctor_lines(c)
    assert any("1 file(s) in the prompt archive are readable beyond their owner" in line
               and line.endswith("[reproduce: majordomus capture render]") for line in lines), lines
    assert any("1 record(s) lack a rendering" in line for line in lines), lines
    code, out = c.cli("capture", "render")
    # the lost .yaml is written; its .md already agrees, so it is not written again
    assert code == 0 and out.startswith("1 rendering(s) written into .ai/local/prompts; 1 file mode(s) set to 600")
    final = doctor_lines(c)
    assert ("OK   prompts     .ai/local/prompts — the archive and every record in it are readable by their owner "
            "only") in final
    assert not any("lack a rendering" in line for line in final)
    assert [line for line in final if line.startswith("FAIL")] == [
        line for line in final if "1 file(s) under a record's name are not records" in line]
    assert len(session_records(initialised_repo)) == 3  # A, B, C closed; A2 still open
