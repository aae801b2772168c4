"""The export itself: the records' spans and log records through the official OTLP/HTTP exporters.

The only module that imports opentelemetry, and only inside `export`: without the `otlp` extra, the command
says how to install it. The SDK's exporters are called directly (no global provider, no background batching),
so each batch's answer is seen and the cursor moves only on SUCCESS. The exporter retries a 5xx or a refused
connection with backoff, but never past its timeout (`OTEL_EXPORTER_OTLP_TIMEOUT`, seconds, default 10).
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterable, Iterator
from typing import IO, TypeVar

from majordomus.errors import MissingError, RefusedError
from majordomus.history.timeline import all_episodes
from majordomus.identity import repository_id
from majordomus.layout import Layout
from majordomus.telemetry import cursor, records
from majordomus.values import value

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

SPAN_BATCH = 512
LOG_BATCH = 1024
INSTALL = "pip install 'majordomus[otlp]'"
T = TypeVar("T")


@value
class Report:
    spans: int
    logs: int
    skipped_spans: int
    skipped_logs: int
    failed: str | None = None


def _batches(items: Iterable[T], size: int) -> Iterator[list[T]]:
    batch: list[T] = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def signal_url(endpoint: str, signal: str) -> str:
    """`http://host:4318` → `http://host:4318/v1/traces`, as OTEL_EXPORTER_OTLP_ENDPOINT is read."""
    return endpoint.rstrip("/") + f"/v1/{signal}"


class Encoder:
    """The SDK's objects for the records' values, and its two exporters."""

    def __init__(self, endpoint: str, repository: str, timeout: float | None) -> None:
        try:
            from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.util.instrumentation import InstrumentationScope
        except ImportError:
            raise MissingError("export --otlp needs the OpenTelemetry packages, which are not installed",
                               f"run {INSTALL}") from None
        for name in ("opentelemetry",):  # our one sentence says what failed; the SDK's own lines are noise here
            log = logging.getLogger(name)
            log.addHandler(logging.NullHandler())
            log.propagate = False
        from majordomus import __version__

        self.resource = Resource.create(records.resource_attributes(repository))
        self.scope = InstrumentationScope(records.SCOPE, __version__)
        self.spans = OTLPSpanExporter(endpoint=signal_url(endpoint, "traces"), timeout=timeout)
        self.logs = OTLPLogExporter(endpoint=signal_url(endpoint, "logs"), timeout=timeout)

    def span(self, s: records.Span) -> Any:
        from opentelemetry.sdk.trace import Event, ReadableSpan
        from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

        code = {"ok": StatusCode.OK, "error": StatusCode.ERROR}.get(s.status, StatusCode.UNSET)
        ctx = SpanContext(s.trace_id, s.span_id, is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED))
        return ReadableSpan(name=s.name, context=ctx, parent=None, resource=self.resource, attributes=s.attributes,
                            events=[Event(n, a, timestamp=t) for n, t, a in s.events], kind=SpanKind.INTERNAL,
                            status=Status(code, s.description), start_time=s.start, end_time=s.end,
                            instrumentation_scope=self.scope)

    def log(self, entry: records.Log) -> Any:
        from opentelemetry._logs import LogRecord, SeverityNumber
        from opentelemetry.sdk._logs import ReadableLogRecord
        from opentelemetry.trace import TraceFlags

        linked = entry.trace_id is not None
        record = LogRecord(timestamp=entry.time, observed_timestamp=entry.time, trace_id=entry.trace_id or 0,
                           span_id=entry.span_id or 0, trace_flags=TraceFlags(TraceFlags.SAMPLED if linked else 0),
                           severity_text="INFO", severity_number=SeverityNumber.INFO, body=entry.body,
                           attributes=entry.attributes, event_name=entry.event_name)
        return ReadableLogRecord(record, self.resource, self.scope)

    def send_spans(self, batch: list[records.Span]) -> bool:
        from opentelemetry.sdk.trace.export import SpanExportResult

        return bool(self.spans.export([self.span(s) for s in batch]) == SpanExportResult.SUCCESS)

    def send_logs(self, batch: list[records.Log]) -> bool:
        from opentelemetry.sdk._logs.export import LogRecordExportResult

        return bool(self.logs.export([self.log(x) for x in batch]) == LogRecordExportResult.SUCCESS)

    def close(self) -> None:
        self.spans.shutdown()
        self.logs.shutdown()


def check_endpoint(endpoint: str) -> str:
    if not endpoint.startswith(("http://", "https://")):
        raise RefusedError(f"--otlp {endpoint!r} is not an OTLP/HTTP endpoint",
                           "give its base URL, e.g. --otlp http://localhost:4318 (or set OTEL_EXPORTER_OTLP_ENDPOINT)")
    return endpoint.rstrip("/")


def export(layout: Layout, endpoint: str, *, with_prompts: bool = False, dry_run: bool = False,
           timeout: float | None = None, out: IO[str] | None = None) -> Report:
    """Send what this endpoint has not accepted yet; `dry_run` prints it (one JSON object a line) instead."""
    endpoint = check_endpoint(endpoint)
    repository = repository_id(layout.root)
    with cursor.lock(layout):
        cur = cursor.Cursor(layout, endpoint)
        sources = records.Sources(layout)
        for _ in records.prompts(layout, repository, False, sources):  # the turns of each episode
            pass
        pending_spans = [s for s in records.spans(repository, all_episodes(layout), sources)
                         if s.episode not in cur.episodes]
        pending_logs = (x for x in records.prompts(layout, repository, with_prompts, None) if x.key not in cur.prompts)
        if dry_run:
            stream = out or sys.stdout
            stream.write(json.dumps({"signal": "resource", "attributes": records.resource_attributes(repository),
                                     "endpoint": endpoint}) + "\n")
            n_logs = 0
            for s in pending_spans:
                stream.write(json.dumps(s.to_json(), ensure_ascii=False) + "\n")
            for x in pending_logs:
                stream.write(json.dumps(x.to_json(), ensure_ascii=False) + "\n")
                n_logs += 1
            return Report(len(pending_spans), n_logs, len(cur.episodes), len(cur.prompts))
        enc = Encoder(endpoint, repository, timeout)
        sent_spans = sent_logs = 0
        try:
            for batch in _batches(pending_spans, SPAN_BATCH):
                if not enc.send_spans(batch):
                    return Report(sent_spans, sent_logs, len(cur.episodes), len(cur.prompts),
                                  failed=signal_url(endpoint, "traces"))
                cur.episodes.update(s.episode for s in batch)
                cur.save()
                sent_spans += len(batch)
            for logs in _batches(pending_logs, LOG_BATCH):
                if not enc.send_logs(logs):
                    return Report(sent_spans, sent_logs, len(cur.episodes), len(cur.prompts),
                                  failed=signal_url(endpoint, "logs"))
                cur.prompts.update(x.key for x in logs)
                cur.save()
                sent_logs += len(logs)
        finally:
            enc.close()
        return Report(sent_spans, sent_logs, len(cur.episodes) - sent_spans, len(cur.prompts) - sent_logs)
