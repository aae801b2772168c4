"""`export --otlp`'s encoding: 10k episodes and 100k prompt metadata records through the real OTLP/HTTP exporters.

    .venv/bin/python bench/otlp_export.py [--episodes 10000] [--prompts 100000]

Synthetic records (ten prompts an episode, a compaction in every third, both outcomes, four clients) are turned
into spans and log records by the product's own `telemetry.records`, then into the SDK's objects and sent by
`telemetry.otlp.Encoder` (the official exporters, the batches the export uses) to a loopback sink: a child
process that keeps every request and, after the timed runs, decodes each with the opentelemetry-proto messages
and counts what it got. Each run is a
child of its own, launched fresh, so its peak RSS (ru_maxrss, the interpreter and the SDK included) is its
alone. The baseline, measured in the same run just before: the same records built the same way and written as
`json.dumps` lines to /dev/null. Every export that does not answer SUCCESS, and a sink count that is not what
was sent, is an error. Targets: >= 5000 episodes/s, peak <= 100 MiB. Reading the record from disk is not
timed here (bench/export.py times the readers).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

TARGET_EPS = 5000.0
TARGET_MIB = 100.0
CLIENTS = ("claude-code", "codex", "gemini", "copilot")
REPOSITORY = "local:0123456789abcdef"


def stamp(second: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(1_780_000_000 + second))


def episodes(n: int, per: int) -> Any:
    """(Episode, its compaction times, its turns) for n episodes, one at a time."""
    from majordomus.history.timeline import Episode

    for i in range(n):
        start = i * 600
        compactions = 1 if i % 3 == 0 else 0
        e = Episode(id=f"s-{i:014d}-{i % 65536:04x}", provider=CLIENTS[i % 4],
                    state="interrupted" if i % 5 == 0 else "closed", started_at=stamp(start),
                    closed_at=stamp(start + 590), branch=f"feature/{i % 40}", title=None,
                    worktree_id="00112233445566ff", start_head=f"{i:040x}", head=f"{i + 1:040x}",
                    end_reason="other" if i % 5 == 0 else "prompt_input_exit", last_turn="completed",
                    compactions=compactions, changed_files=("src/a.py", "src/b.py"), commits=(f"{i + 1:040x}",))
        turns = [stamp(start + 30 * t) for t in range(per)]
        yield e, [stamp(start + 300)] * compactions, turns


def prompts(n_episodes: int, per: int) -> Any:
    """(record name, PromptRecord) for every prompt, oldest first."""
    from majordomus.archive.record import PromptRecord

    for i in range(n_episodes):
        for t in range(per):
            at = stamp(i * 600 + 30 * t)
            text = f"turn {t} of episode {i}: refactor the parser and keep the tests green " * 3
            yield (f"{at.replace('-', '').replace(':', '')}-turn-{t}-of-episode-{i}.json",
                   PromptRecord(schema="majordomus.capture/v1", started_at=at, provider=CLIENTS[i % 4],
                                event="UserPromptSubmit", id=f"p-{i}-{t}", session=f"client-{i}",
                                episode=f"s-{i:014d}-{i % 65536:04x}", episode_link="open",
                                repository_id=REPOSITORY, worktree_id="00112233445566ff", branch=f"feature/{i % 40}",
                                head=f"{i:040x}", text=text, redacted="assignment" if t == 0 else None))


def values(n: int, m: int) -> tuple[Any, Any]:
    """The spans and the log records, as generators: what the export builds from the record."""
    from majordomus.telemetry import records

    per = max(1, m // max(1, n))

    def spans() -> Any:
        for e, compacted, turns in episodes(n, per):
            sources = records.Sources.__new__(records.Sources)
            sources.compacted, sources.client_sessions = {e.id: compacted}, {e.id: f"client-{e.id}"}
            sources.turns = {e.id: turns}
            span = records.episode_span(REPOSITORY, e, sources)
            assert span is not None
            yield span

    def logs() -> Any:
        for name, r in prompts(n, per):
            log = records.prompt_log(REPOSITORY, name, r, False)
            assert log is not None
            yield log

    return spans(), logs()


def run_child(mode: str, n: int, m: int, sink: str) -> dict[str, Any]:
    from majordomus.telemetry import otlp

    spans, logs = values(n, m)
    errors = sent_spans = sent_logs = 0
    started = time.perf_counter()
    if mode == "json":
        with open(os.devnull, "w", encoding="utf-8") as out:
            for s in spans:
                out.write(json.dumps(s.to_json()) + "\n")
                sent_spans += 1
            mid = time.perf_counter()
            for x in logs:
                out.write(json.dumps(x.to_json()) + "\n")
                sent_logs += 1
    else:
        enc = otlp.Encoder(otlp.Endpoints(f"{sink}/v1/traces", f"{sink}/v1/logs"), REPOSITORY)
        for batch in otlp._batches(spans, otlp.SPAN_BATCH):
            try:
                enc.send_spans(batch)
                sent_spans += len(batch)
            except Exception:  # noqa: BLE001 - a bench counts every failure
                errors += 1
        mid = time.perf_counter()
        for lbatch in otlp._batches(logs, otlp.LOG_BATCH):
            try:
                enc.send_logs(lbatch)
                sent_logs += len(lbatch)
            except Exception:  # noqa: BLE001
                errors += 1
        enc.close()
    end = time.perf_counter()
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"spans_s": mid - started, "logs_s": end - mid, "spans": sent_spans, "logs": sent_logs,
            "errors": errors, "peak_mib": rss_mib}


def run_sink() -> None:
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    counts = {"spans": 0, "logs": 0, "bytes": 0}
    lock = threading.Lock()
    bodies: list[tuple[str, bytes]] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802 - decoded here, after the timed runs: no CPU taken from them
            with lock:
                for path, body in bodies:
                    if path == "/v1/traces":
                        req: Any = ExportTraceServiceRequest.FromString(body)
                        counts["spans"] += sum(len(ss.spans) for rs in req.resource_spans for ss in rs.scope_spans)
                    else:
                        req = ExportLogsServiceRequest.FromString(body)
                        counts["logs"] += sum(len(sl.log_records) for rl in req.resource_logs
                                              for sl in rl.scope_logs)
                    counts["bytes"] += len(body)
                bodies.clear()
            self._answer(json.dumps(counts).encode())

        def do_POST(self) -> None:  # noqa: N802
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            with lock:
                bodies.append((self.path, body))
            self._answer(b"")

        def _answer(self, body: bytes) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)  # one thread per exporter connection (keep-alive)
    print(server.server_address[1], flush=True)
    server.serve_forever()


def child(mode: str, n: int, m: int, sink: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, __file__, "--child", mode, "--episodes", str(n), "--prompts", str(m),
                           "--sink", sink], capture_output=True, text=True, check=False, timeout=900)
    if done.returncode != 0:
        sys.stderr.write(done.stderr)
        return {"spans_s": 0.0, "logs_s": 0.0, "spans": 0, "logs": 0, "errors": 1, "peak_mib": 0.0}
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def counted(sink: str) -> dict[str, int]:
    from urllib.request import urlopen

    with urlopen(sink + "/count", timeout=30) as answer:  # noqa: S310 - our loopback sink
        result: dict[str, int] = json.loads(answer.read())
        return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, default=10000)
    ap.add_argument("--prompts", type=int, default=100000)
    ap.add_argument("--child", choices=("otlp", "json"))
    ap.add_argument("--sink", default="")
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        run_sink()
        return
    if args.child:
        print(json.dumps(run_child(args.child, args.episodes, args.prompts, args.sink)))
        return
    n, m = args.episodes, args.prompts
    sink_proc = subprocess.Popen([sys.executable, __file__, "--serve"], stdout=subprocess.PIPE, text=True)
    try:
        assert sink_proc.stdout is not None
        sink = f"http://127.0.0.1:{int(sink_proc.stdout.readline())}"
        base = child("json", n, m, sink)
        real = child("otlp", n, m, sink)
        got = counted(sink)
    finally:
        sink_proc.terminate()
        sink_proc.wait(timeout=30)
    errors = real["errors"] + base["errors"]
    errors += (got["spans"], got["logs"]) != (n, (m // max(1, n)) * n)
    errors += (real["spans"], real["logs"]) != (got["spans"], got["logs"])
    eps = real["spans"] / real["spans_s"] if real["spans_s"] else 0.0
    lps = real["logs"] / real["logs_s"] if real["logs_s"] else 0.0
    print(f"otlp export encoding: {n} episodes, {got['logs']} prompt log records to a loopback sink "
          f"({got['bytes'] / 2**20:.1f} MiB of protobuf received and decoded)")
    print(f"  {'run':<26} {'episodes/s':>11} {'logs/s':>9} {'seconds':>8} {'peak MiB':>9} {'errors':>6}")
    for label, r in (("baseline json.dumps", base), ("otlp/http protobuf", real)):
        e = r["spans"] / r["spans_s"] if r["spans_s"] else 0.0
        lg = r["logs"] / r["logs_s"] if r["logs_s"] else 0.0
        print(f"  {label:<26} {e:11.0f} {lg:9.0f} {r['spans_s'] + r['logs_s']:8.2f} {r['peak_mib']:9.1f} "
              f"{r['errors']:>6}")
    verdict = [f"episodes/s {'>=' if eps >= TARGET_EPS else 'MISSED <'} {TARGET_EPS:.0f}",
               f"peak {'<=' if real['peak_mib'] <= TARGET_MIB else 'MISSED >'} {TARGET_MIB:.0f} MiB",
               f"errors {errors}", f"logs/s {lps:.0f}"]
    print("  " + "; ".join(verdict))
    if errors:
        raise SystemExit("wrong results: see the errors")


if __name__ == "__main__":
    main()
