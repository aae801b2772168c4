"""The export itself: the records' spans and log records through the official OTLP/HTTP exporters.

The only module that imports opentelemetry, and only inside `Encoder`: without the `otlp` extra, the command
says how to install it. The SDK's exporters are called directly (no global provider, no background batching),
so each batch's answer is seen and the cursor moves only on SUCCESS. The exporter retries a 429/502/503/504 or
a refused connection with backoff, but never past its timeout (`OTEL_EXPORTER_OTLP_TIMEOUT`, seconds, default
10): a dead endpoint fails within it. Its headers, timeout, compression and certificates come from the
standard `OTEL_EXPORTER_OTLP_*` variables, read by the SDK itself.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import chain
from typing import TYPE_CHECKING, TypeVar

from majordomus.errors import InternalError, MissingError, UsageError
from majordomus.history.timeline import all_episodes
from majordomus.identity import repository_id
from majordomus.layout import Layout
from majordomus.telemetry import cursor, records

if TYPE_CHECKING:
    from typing import Any

SPAN_BATCH = 512
LOG_BATCH = 2048
INSTALL = "pip install 'majordomus[otlp]'"
T = TypeVar("T")


@dataclass(frozen=True)
class Endpoints:
    traces: str  # the full URL spans are POSTed to
    logs: str

    @property
    def shown(self) -> str:
        t, lg = cursor.shown(self.traces), cursor.shown(self.logs)
        base = t.removesuffix("/v1/traces")
        return base if lg == base + "/v1/logs" else f"{t} and {lg}"


@dataclass(frozen=True)
class Report:
    spans: int  # sent (or, dry, would be sent) by this run
    logs: int
    accepted_spans: int  # what the endpoint had accepted before this run
    accepted_logs: int


def _checked(url: str, where: str) -> str:
    if not url.startswith(("http://", "https://")) or not cursor.shown(url).split("://", 1)[1]:
        raise UsageError(f"{where} {cursor.shown(url) or url!r} is not an OTLP/HTTP URL",
                         "give its base URL, e.g. --otlp http://localhost:4318")
    return url


def endpoints(given: str | None, env: dict[str, str] | None = None) -> Endpoints:
    """`--otlp URL` (a base: `/v1/traces` and `/v1/logs` are added), else the standard variables: the
    per-signal `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`/`_LOGS_ENDPOINT` (used as they are), else
    `OTEL_EXPORTER_OTLP_ENDPOINT` (a base)."""
    environ = os.environ if env is None else env
    if given:
        base = _checked(given, "--otlp").rstrip("/")
        return Endpoints(f"{base}/v1/traces", f"{base}/v1/logs")
    base = environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip().rstrip("/")
    found = {}
    for signal in ("traces", "logs"):
        own = environ.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT", "").strip()
        if own:
            found[signal] = _checked(own, f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT")
        elif base:
            found[signal] = _checked(base, "OTEL_EXPORTER_OTLP_ENDPOINT") + f"/v1/{signal}"
        else:
            raise UsageError("export --otlp needs an endpoint", "give one (--otlp http://localhost:4318) or set "
                                                               "OTEL_EXPORTER_OTLP_ENDPOINT")
    return Endpoints(found["traces"], found["logs"])


def _batches(items: Iterable[T], size: int) -> Iterator[list[T]]:
    batch: list[T] = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


class _LastError(logging.Handler):
    """The SDK's own account of a failed batch (`... code: 503, reason: ...`), for our one sentence; the SDK's
    lines themselves are not printed."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.error: str | None = None
        self.transient: str | None = None  # the retried error before a give-up, e.g. the refused connection

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
        except (TypeError, ValueError):
            text = str(record.msg)
        if record.levelno >= logging.ERROR:
            self.error = text
        elif text.startswith("Transient error"):
            self.transient = text

    @property
    def last(self) -> str | None:
        if self.error and self.transient and "timeout, max retries" in self.error:
            return f"{self.error} {self.transient}"[:400]
        return None if self.error is None else self.error[:400]


class Encoder:
    """The SDK's objects for the records' values, and its two exporters (`session`: a requests.Session of the
    caller's, e.g. the bench's)."""

    def __init__(self, where: Endpoints, repository: str, session: Any = None) -> None:
        try:
            from opentelemetry._logs import SeverityNumber
            from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.util.instrumentation import InstrumentationScope
        except ImportError:
            raise MissingError("export --otlp needs the OpenTelemetry packages, which are not installed",
                               f"run {INSTALL}") from None
        from majordomus import __version__

        self.errors = _LastError()
        log = logging.getLogger("opentelemetry")
        log.addHandler(self.errors)
        log.propagate = False
        self.where = where
        self.severity = SeverityNumber.INFO
        self.resource = Resource(records.resource_attributes(repository))  # ours only: no host or process detected
        self.scope = InstrumentationScope(records.SCOPE, __version__)
        self.spans = OTLPSpanExporter(endpoint=where.traces, session=session)
        self.logs = OTLPLogExporter(endpoint=where.logs, session=session)

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
        from opentelemetry._logs import LogRecord
        from opentelemetry.sdk._logs import ReadableLogRecord
        from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, set_span_in_context

        context = None
        if entry.trace_id is not None and entry.span_id is not None:  # the prompt's episode span
            linked = SpanContext(entry.trace_id, entry.span_id, is_remote=False,
                                 trace_flags=TraceFlags(TraceFlags.SAMPLED))
            context = set_span_in_context(NonRecordingSpan(linked))
        record = LogRecord(timestamp=entry.time, observed_timestamp=entry.time, context=context,
                           severity_text="INFO", severity_number=self.severity, body=entry.body,
                           attributes=entry.attributes, event_name=entry.event_name)
        return ReadableLogRecord(record, self.resource, self.scope)

    def _failed(self, url: str) -> InternalError:
        why = self.errors.last or "no answer"
        return InternalError(f"{cursor.shown(url)} did not accept the export ({why}); what it accepted before is "
                             "kept in the cursor and the rest is sent by the next run",
                             "check the endpoint (is the Collector up? OTEL_EXPORTER_OTLP_HEADERS, "
                             "OTEL_EXPORTER_OTLP_TIMEOUT) and run the export again")

    def send_spans(self, batch: list[records.Span]) -> None:
        from opentelemetry.sdk.trace.export import SpanExportResult

        if self.spans.export([self.span(s) for s in batch]) != SpanExportResult.SUCCESS:
            raise self._failed(self.where.traces)

    def send_logs(self, batch: list[records.Log]) -> None:
        from opentelemetry.sdk._logs.export import LogRecordExportResult

        if self.logs.export([self.log(x) for x in batch]) != LogRecordExportResult.SUCCESS:
            raise self._failed(self.where.logs)

    def close(self) -> None:
        self.spans.shutdown()  # type: ignore[no-untyped-call]
        self.logs.shutdown()  # type: ignore[no-untyped-call]
        logging.getLogger("opentelemetry").removeHandler(self.errors)


def export(layout: Layout, where: Endpoints, *, with_prompts: bool = False,
           dry: Callable[[records.Span | records.Log], None] | None = None,
           progress: Callable[[Report], None] | None = None) -> Report:
    """Send what these endpoints have not accepted yet, spans first, the cursor saved after every accepted batch.
    `dry` is handed each pending value instead, and nothing is sent or saved. An endpoint that refuses a batch
    raises InternalError after `progress` was told what was sent before it."""
    repository = repository_id(layout.root)
    with cursor.lock(layout):
        cur = cursor.Cursor(layout)
        done_spans, done_logs = cur.accepted(where.traces), cur.accepted(where.logs)
        before = (len(done_spans), len(done_logs))
        sources = records.Sources(layout)
        records.note_turns(layout, sources)
        pending_spans = (s for s in records.spans(repository, all_episodes(layout), sources)
                         if s.episode not in done_spans)
        pending_logs = (x for x in records.prompts(layout, repository, with_prompts) if x.key not in done_logs)
        sent = [0, 0]

        def report() -> Report:
            return Report(sent[0], sent[1], *before)

        if dry is not None:
            item: records.Span | records.Log
            for item in chain[records.Span | records.Log](pending_spans, pending_logs):
                dry(item)
                sent[isinstance(item, records.Log)] += 1
            return report()
        enc = Encoder(where, repository)
        try:
            for spans in _batches(pending_spans, SPAN_BATCH):
                enc.send_spans(spans)
                done_spans.update(s.episode for s in spans)
                cur.save()
                sent[0] += len(spans)
            for logs in _batches(pending_logs, LOG_BATCH):
                enc.send_logs(logs)
                done_logs.update(x.key for x in logs)
                cur.save()
                sent[1] += len(logs)
        except InternalError:
            if progress is not None:
                progress(report())
            raise
        finally:
            enc.close()
        return report()
