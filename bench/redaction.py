"""Redaction throughput on ordinary prompt-like text, and time per MB on adversarial input.

Run: python bench/redaction.py. Prints figures only; the baseline is the prose measured in this run.
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path
from typing import Callable

try:
    import majordomus.archive.redact  # noqa: F401  (installed)
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from majordomus.archive.redact import load_rules, redact

MB = 1_000_000
SENTENCES = [
    "Please refactor the session module so that the episode closes on SIGTERM as well.",
    "The test fails on CI but passes locally; the traceback points at layout.py line 212.",
    "Can you explain why the token budget is exceeded when the context has 180k tokens?",
    "Rename the password field in the form to passphrase and keep the old name as an alias.",
    "We pinned the image to python@sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08.",
    "Commit 3f786850e387550fdab836ed7e6dc881de23001b broke the reconcile step for orphan records.",
    "The request id 123e4567-e89b-12d3-a456-426614174000 shows up twice in the ledger.",
    "Bearer authentication is described in RFC 6750; the server rejects a missing header with 401.",
    "Use sk-learn style estimators, and keep keys out of the prompt archive (export them instead).",
]
CODE = '''```python
def close_episode(board: Board, key: str, *, reason: str = "end") -> Outcome:
    """Close the open episode of this provider session, once."""
    episode = board.open.get(key)
    if episode is None:
        return Outcome("refused", f"no open episode for {key!r}")
    token = episode.lease.token
    return board.close(episode, token=token, reason=reason)
```
'''
SECRETS = [
    "export GITHUB_TOKEN=ghp_FakeTokenNot4RealUse0nlyInTests12345",
    'curl -H "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJmYWtlIn0.FakeSignature0123456789" https://x',
    "DB_PASSWORD=Fake0Opaque1Value2ForTests3",
    "aws_access_key_id = AKIAFAKEK3YN0TREAL22",
]
ADVERSARIAL: dict[str, Callable[[], str]] = {
    "'a' x 1 MB": lambda: "a" * MB,
    "'A' x 1 MB": lambda: "A" * MB,
    "'-' x 1 MB": lambda: "-" * MB,
    "'=' x 1 MB": lambda: "=" * MB,
    "' ' x 1 MB": lambda: " " * MB,
    "'sk-ant-' x 100k": lambda: "sk-ant-" * 100_000,
    "'sk-' x 300k": lambda: "sk-" * 300_000,
    "'sk-proj-' x 100k": lambda: "sk-proj-" * 100_000,
    "'ghp_' x 100k": lambda: "ghp_" * 100_000,
    "'AKIA' x 200k": lambda: "AKIA" * 200_000,
    "'xoxb-1-' x 100k": lambda: "xoxb-1-" * 100_000,
    "PEM header x 20k, no END": lambda: "-----BEGIN RSA PRIVATE KEY-----\n" * 20_000,
    "PEM header + 1 MB body": lambda: "-----BEGIN RSA PRIVATE KEY-----\n" + "A" * MB,
    "'password=' x 100k": lambda: "password=" * 100_000,
    "'password=\"' x 100k": lambda: 'password="' * 100_000,
    "'key=' x 250k": lambda: "key=" * 250_000,
    "'Bearer ' x 100k": lambda: "Bearer " * 100_000,
    "api_key= + 1 MB value": lambda: "api_key=" + "a1" * (MB // 2),
    "25k real tokens": lambda: " ".join(["ghp_FakeTokenNot4RealUse0nlyInTests12345"] * 25_000),
}


def build_prose(size: int, seed: int = 5) -> str:
    chooser = random.Random(seed)
    parts: list[str] = []
    length = 0
    while length < size:
        roll = chooser.random()
        if roll < 0.1:
            part = CODE
        elif roll < 0.102:  # a few credentials, as in a real archive
            part = chooser.choice(SECRETS) + "\n"
        else:
            part = chooser.choice(SENTENCES) + " "
        parts.append(part)
        length += len(part)
    return "".join(parts)


def seconds_per_mb(text: str, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        redact(text)
        best = min(best, time.perf_counter() - started)
    return best / (len(text) / MB)


def main() -> None:
    started = time.perf_counter()
    rules = load_rules()
    read = time.perf_counter() - started
    compiled = time.perf_counter()
    for rule in rules:
        rule.pattern  # noqa: B018 - compile each once, as the first text that needs it would
    print(f"table: {len(rules)} rules, read in {read * 1000:.1f} ms; compiling all of them takes "
          f"{(time.perf_counter() - compiled) * 1000:.1f} ms (a prompt compiles only the rules its hints call for)")

    prose = build_prose(4 * MB)
    redacted, names = redact(prose)
    baseline = seconds_per_mb(prose)
    print(f"prose: {len(prose) / MB:.1f} MB, {redacted.count('[redacted:')} credentials ({', '.join(names)})")
    print(f"prose throughput: {1 / baseline:.1f} MB/s ({baseline * 1000:.1f} ms/MB)")
    for rule in rules:
        started = time.perf_counter()
        sum(1 for _ in rule.pattern.finditer(prose))
        print(f"  {rule.name:<20} {(time.perf_counter() - started) / (len(prose) / MB) * 1000:7.1f} ms/MB")

    print("\nadversarial input                  ms/MB   x prose")
    worst = 0.0
    for label, build in ADVERSARIAL.items():
        cost = seconds_per_mb(build(), repeat=1)
        worst = max(worst, cost)
        print(f"  {label:<30} {cost * 1000:8.1f}  {cost / baseline:7.1f}")
    print(f"worst adversarial / prose: {worst / baseline:.1f}x")


if __name__ == "__main__":
    main()
