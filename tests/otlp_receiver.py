"""A loopback OTLP/HTTP receiver for the tests: stdlib http.server on 127.0.0.1 (a random port), decoding
`/v1/traces` and `/v1/logs` with the official opentelemetry-proto messages, and able to fail on purpose."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


def value_of(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [value_of(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: value_of(kv.value) for kv in v.kvlist_value.values}
    return None if kind is None else getattr(v, kind)


def attributes(kvs: Any) -> dict[str, Any]:
    return {kv.key: value_of(kv.value) for kv in kvs}


class Receiver:
    """`mode`: "ok", a status code ("500", "503": every request answered so), "slow" (500 after `delay` seconds)."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.delay = 5.0
        self.raw: list[tuple[str, bytes]] = []  # every request body received, whatever it was answered
        self.traces: list[ExportTraceServiceRequest] = []  # only the accepted ones
        self.logs: list[ExportLogsServiceRequest] = []
        self.headers: list[dict[str, str]] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with outer.lock:
                    outer.raw.append((self.path, body))
                    outer.headers.append({k.lower(): v for k, v in self.headers.items()})
                    mode = outer.mode
                if mode == "slow":
                    time.sleep(outer.delay)
                if mode != "ok":
                    self._answer(500 if mode == "slow" else int(mode), b"")
                    return
                if self.path == "/v1/traces":
                    request: Any = ExportTraceServiceRequest.FromString(body)
                    answer = ExportTraceServiceResponse().SerializeToString()
                    with outer.lock:
                        outer.traces.append(request)
                elif self.path == "/v1/logs":
                    request = ExportLogsServiceRequest.FromString(body)
                    answer = ExportLogsServiceResponse().SerializeToString()
                    with outer.lock:
                        outer.logs.append(request)
                else:
                    self._answer(404, b"")
                    return
                self._answer(200, answer)

            def _answer(self, code: int, body: bytes) -> None:
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", "application/x-protobuf")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:  # the exporter gave up on a slow answer and closed
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def spans(self) -> list[tuple[dict[str, Any], Any]]:
        """Every accepted span, with its resource's attributes."""
        return [(attributes(rs.resource.attributes), span) for req in self.traces for rs in req.resource_spans
                for ss in rs.scope_spans for span in ss.spans]

    def log_records(self) -> list[tuple[dict[str, Any], Any]]:
        return [(attributes(rl.resource.attributes), rec) for req in self.logs for rl in req.resource_logs
                for sl in rl.scope_logs for rec in sl.log_records]
