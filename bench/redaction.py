"""Redaction: recall and false positives on the corpora, throughput on prose and code, time on adversarial input.

Run: python bench/redaction.py. Prints figures only. Baselines measured in the same run: every rule's
pattern scanning the whole text (`use_hints=False`, what the hook did before hints, anchors and locators),
and, for adversarial input, the prose. Targets: 0 credentials missed and 0 hard negatives changed;
>= 50 MB/s on prose, >= 30 MB/s on code; the worst adversarial input <= 5x prose per MB.
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path
from typing import Callable

try:
    import majordomus.redact  # noqa: F401  (installed)
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from majordomus.redact import load_rules, redact

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
CORPORA = [Path(__file__).resolve().parents[1] / "tests" / "archive" / name
           for name in ("redaction_corpus.tsv", "redaction_corpus_scanners.tsv")]
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
    "'hf_' x 300k": lambda: "hf_" * 300_000,
    "'eyJ' x 300k": lambda: "eyJ" * 300_000,
    "'://' x 300k": lambda: "://" * 300_000,
    "'a:' x 500k after '://'": lambda: "x://" + "a:" * 500_000,
    "'Basic ' x 150k": lambda: "Basic " * 150_000,
    "'AccountKey=' x 80k": lambda: "AccountKey=" * 80_000,
    "JSON name/value pairs x 40k": lambda: '"api_key", "value": "' * 40_000,
    "'TOKEN=' + 1 MB of '$*!#'": lambda: "TOKEN=" + "$*!#" * 250_000,
    "'TOKEN=' + 1 MB of 'aB'": lambda: "TOKEN=" + "aB" * 500_000,
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


def seconds_per_mb(text: str, repeat: int = 3, use_hints: bool = True) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        redact(text, use_hints=use_hints)
        best = min(best, time.perf_counter() - started)
    return best / (len(text) / MB)


def corpus_rows(path: Path) -> list[tuple[str, str]]:
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line or line.startswith("#"):
            continue
        expect, text = line.split("\t", 1)
        if path.name.endswith("_scanners.tsv"):
            text = text.split("\t", 1)[1]
        rows.append((expect, text.replace("{NL}", "\n").replace("{CR}", "\r")))
    return rows


def print_corpus(path: Path) -> None:
    rows = corpus_rows(path)
    positives = [(e, t) for e, t in rows if e != "none"]
    negatives = [t for e, t in rows if e == "none"]
    missed = [t for e, t in positives if f"[redacted:{e}]" not in redact(t)[0]]
    changed = [t for t in negatives if redact(t) != (t, ())]
    changed_bytes = sum(sum(1 for a, b in zip(t, redact(t)[0]) if a != b) + abs(len(t) - len(redact(t)[0]))
                        for t in changed)
    print(f"{path.name}: recall {len(positives) - len(missed)}/{len(positives)} "
          f"({(len(positives) - len(missed)) / len(positives):.1%}), missed {len(missed)}; "
          f"false positives {len(changed)}/{len(negatives)} ({len(changed) / len(negatives):.1%}), "
          f"{changed_bytes} changed byte(s) in hard negatives")
    for text in missed + changed:
        print(f"  ! {text[:120]!r}")


def main() -> None:
    started = time.perf_counter()
    rules = load_rules()
    read = time.perf_counter() - started
    compiled = time.perf_counter()
    for rule in rules:
        rule.pattern  # noqa: B018 - compile each once, as the first text that needs it would
    print(f"table: {len(rules)} rules, read in {read * 1000:.1f} ms; compiling all of them takes "
          f"{(time.perf_counter() - compiled) * 1000:.1f} ms (a prompt compiles only the rules its hints call for)")
    for path in CORPORA:
        print_corpus(path)

    prose = build_prose(4 * MB)
    code = CODE * (4 * MB // len(CODE))
    redacted, names = redact(prose)
    assert redacted == redact(prose, use_hints=False)[0], "the hints changed the result on prose"
    assert redact(code) == redact(code, use_hints=False), "the hints changed the result on code"
    print(f"\nprose: {len(prose) / MB:.1f} MB, {redacted.count('[redacted:')} credentials ({', '.join(names)}); "
          f"code: {len(code) / MB:.1f} MB")
    print("                 MB/s  target   baseline MB/s (every pattern over the whole text)   speed-up")
    baseline = seconds_per_mb(prose)
    for label, text, target in (("prose", prose, 50), ("code", code, 30)):
        cost = seconds_per_mb(text) if label == "code" else baseline
        before = seconds_per_mb(text, repeat=1, use_hints=False)
        print(f"  {label:<10} {1 / cost:8.1f}  >= {target:<4} {1 / before:8.1f}"
              f"{'':46}{before / cost:6.1f}x")
    print("per rule over the whole prose (what use_hints=False costs):")
    for rule in rules:
        started = time.perf_counter()
        sum(1 for _ in rule.pattern.finditer(prose))
        print(f"  {rule.name:<20} {(time.perf_counter() - started) / (len(prose) / MB) * 1000:7.1f} ms/MB")

    print(f"\nadversarial input (prose: {baseline * 1000:.1f} ms/MB)   ms/MB   x prose")
    worst = 0.0
    for label, build in ADVERSARIAL.items():
        cost = seconds_per_mb(build())  # best of 3, as the prose it is divided by
        worst = max(worst, cost)
        print(f"  {label:<34} {cost * 1000:8.1f}  {cost / baseline:7.1f}")
    print(f"worst adversarial / prose: {worst / baseline:.1f}x (target <= 5x)")


if __name__ == "__main__":
    main()
