"""A real OTLP/HTTP trace receiver for the tests: `POST /v1/traces` bodies decoded with the
official `opentelemetry-proto` package, kept as plain spans a test can read."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(item) for item in value.array_value.values]
    return getattr(value, kind) if kind else None


@dataclass(frozen=True)
class Span:
    trace_id: str
    span_id: str
    parent_id: str
    name: str
    kind: str
    service: str
    attributes: dict[str, Any] = field(default_factory=dict)


class Receiver:
    """What the service exported, in arrival order."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._spans: list[Span] = []
        self._changed = threading.Condition()

    def add(self, body: bytes) -> None:
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        spans = []
        for resource_spans in request.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    spans.append(Span(
                        span.trace_id.hex(), span.span_id.hex(), span.parent_span_id.hex(),
                        span.name, ProtoSpan.SpanKind.Name(span.kind),
                        resource.get("service.name", ""),
                        {a.key: _value(a.value) for a in span.attributes}))
        with self._changed:
            self._spans.extend(spans)
            self._changed.notify_all()

    def spans(self) -> list[Span]:
        with self._changed:
            return list(self._spans)

    def wait_for(self, condition: Callable[[list[Span]], bool], timeout_s: float,
                 what: str) -> list[Span]:
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while not condition(self._spans):
                left = deadline - time.monotonic()
                assert left > 0, f"timed out waiting for {what}: {self._spans}"
                self._changed.wait(left)
            return list(self._spans)


@contextmanager
def receiving() -> Iterator[Receiver]:
    """A receiver on a free port of 127.0.0.1; its `url` is an OTLP endpoint
    (OTEL_EXPORTER_OTLP_ENDPOINT)."""
    holder: dict[str, Receiver] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if self.path != "/v1/traces":
                self.send_error(404)
                return
            holder["receiver"].add(body)
            answer = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    holder["receiver"] = receiver = Receiver(f"http://127.0.0.1:{server.server_port}")
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        thread.join()
        server.server_close()
