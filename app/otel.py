"""The OpenTelemetry side of `app.tracing`, imported only when the environment asks for traces.

The tracer provider is made once per process and exports in batches over OTLP/HTTP
(`OTEL_TRACES_EXPORTER`: `otlp`, the default, `console`, or `none`; a comma list takes
several). What it traces:

- every request Flask serves (`opentelemetry-instrumentation-flask`), and the two hot paths,
  which bypass Flask, through the WSGI middleware that instrumentation is built on;
- every statement (`opentelemetry-instrumentation-sqlalchemy`; `sql_batch` for the several
  statements `app.database.batches` sends in one round trip past SQLAlchemy) and Redis command
  (`opentelemetry-instrumentation-redis`);
- each job attempt (`process memory`, a consumer span in the trace of the request that enqueued
  it: `inject` puts the context into `job.meta`, `job_span` takes it out);
- the model call (`model_call`): a client span of the GenAI semantic conventions,
  `gen_ai.request.model`, `gen_ai.usage.input_tokens`/`output_tokens`, never the messages.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit
from wsgiref.types import WSGIApplication

from flask import Flask
from opentelemetry import propagate, trace
from opentelemetry.instrumentation.flask import FlaskInstrumentor
from opentelemetry.instrumentation.redis import RedisInstrumentor
from opentelemetry.instrumentation.sqlalchemy import SQLAlchemyInstrumentor
from opentelemetry.instrumentation.wsgi import OpenTelemetryMiddleware
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter

from app.misconfigured import ConfigurationError

DEFAULT_SERVICE_NAME = "memory-service"
QUEUE = "memory"
# Where the openai client sends a model that names no endpoint.
DEFAULT_OPENAI_URL = "https://api.openai.com/v1"
# Probes and scrapes: thousands a day, nothing to follow.
EXCLUDED_URLS = "healthz,readyz,metrics,static/"

_lock = threading.Lock()
_provider: TracerProvider | None = None


def _exporters() -> list[SpanExporter]:
    names = [name.strip().lower()
             for name in (os.environ.get("OTEL_TRACES_EXPORTER") or "otlp").split(",")]
    exporters: list[SpanExporter] = []
    for name in names:
        if name == "otlp":
            exporters.append(_otlp())
        elif name == "console":
            exporters.append(ConsoleSpanExporter())
        elif name not in ("none", ""):
            raise ConfigurationError(f"OTEL_TRACES_EXPORTER: {name!r} is not one of otlp, "
                                     "console, none")
    return exporters


def _otlp() -> SpanExporter:
    protocol = (os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
                or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf")
    if protocol != "http/protobuf":
        raise ConfigurationError(f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r}: this service "
                                 "exports OTLP over HTTP (http/protobuf) only")
    # Reads OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT, _HEADERS, _TIMEOUT, … itself.
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()


def provider() -> TracerProvider:
    """This process's tracer provider, made on first use (also the global one). Its batch
    processor renews its thread in a forked child (a work horse)."""
    global _provider
    with _lock:
        if _provider is None:
            # OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES are read by Resource.create.
            named = {} if os.environ.get("OTEL_SERVICE_NAME") else {
                "service.name": DEFAULT_SERVICE_NAME}
            made = TracerProvider(resource=Resource.create(named))
            for exporter in _exporters():
                made.add_span_processor(BatchSpanProcessor(exporter))
            trace.set_tracer_provider(made)
            RedisInstrumentor().instrument(tracer_provider=made)
            _provider = made
        return _provider


def instrument_app(app: Flask) -> None:
    """Flask's requests and the app's engines."""
    traced = provider()
    FlaskInstrumentor().instrument_app(app, tracer_provider=traced, excluded_urls=EXCLUDED_URLS)
    from app.extensions import db

    with app.app_context():
        engines = list(db.engines.values())
    instrumentor = SQLAlchemyInstrumentor()
    if instrumentor.is_instrumented_by_opentelemetry:
        # A second app in one process (tests): its engines join the instrumented ones.
        instrumentor.uninstrument()
    instrumentor.instrument(engines=engines, tracer_provider=traced)


def traced_wsgi(endpoint: WSGIApplication) -> WSGIApplication:
    return OpenTelemetryMiddleware(endpoint, tracer_provider=provider())


class ModelCall:
    """The span of one chat completion, told what came back."""

    def __init__(self, span: trace.Span) -> None:
        self.span = span

    def answered(self, response: object, input_tokens: int | None,
                 output_tokens: int | None) -> None:
        found: dict[str, Any] = {
            "gen_ai.response.model": getattr(response, "model", None),
            "gen_ai.response.id": getattr(response, "id", None),
            "gen_ai.usage.input_tokens": input_tokens,
            "gen_ai.usage.output_tokens": output_tokens}
        choices = getattr(response, "choices", None) or []
        reasons = [choice.finish_reason for choice in choices
                   if getattr(choice, "finish_reason", None)]
        if reasons:
            found["gen_ai.response.finish_reasons"] = reasons
        self.span.set_attributes({key: value for key, value in found.items()
                                  if value is not None})


@contextmanager
def model_call(model: str, base_url: str | None) -> Iterator[ModelCall]:
    """A client span `chat <model>` as the GenAI semantic conventions define it (the official
    OpenAI instrumentation, opentelemetry-instrumentation-openai-v2 2.4b0, imports `httpx`,
    which openai 3 replaced by `httpx2`: it cannot load here). Never the messages."""
    server = urlsplit(base_url or DEFAULT_OPENAI_URL)
    attributes = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
                  "gen_ai.request.model": model, "server.address": server.hostname or "",
                  "server.port": server.port or (443 if server.scheme == "https" else 80)}
    tracer = provider().get_tracer(__name__)
    with tracer.start_as_current_span(f"chat {model}", kind=trace.SpanKind.CLIENT,
                                      attributes=attributes) as span:
        try:
            yield ModelCall(span)
        except Exception as exc:
            # The low-cardinality kind of failure: LlmTimeout, LlmTransientError, …
            span.set_attribute("error.type", type(exc).__name__)
            raise


@contextmanager
def sql_batch(connection: Any, texts: Sequence[str]) -> Iterator[None]:
    """A database client span of the batch (DB semantic conventions: operation `BATCH`), its
    text the statements as compiled, with placeholders: never a value."""
    url = connection.engine.url
    attributes = {"db.system.name": connection.dialect.name, "db.operation.name": "BATCH",
                  "db.operation.batch.size": len(texts), "db.query.text": ";\n".join(texts),
                  "db.namespace": url.database or "", "server.address": url.host or "",
                  "server.port": url.port or 3306}
    tracer = provider().get_tracer(__name__)
    with tracer.start_as_current_span(f"BATCH {url.database}", kind=trace.SpanKind.CLIENT,
                                      attributes=attributes):
        yield


def inject(meta: MutableMapping[str, Any]) -> None:
    """The current trace context (W3C `traceparent`) into a job's meta."""
    propagate.inject(meta)


@contextmanager
def job_span(kind: str, job_id: str, attempt: int,
             meta: Mapping[str, Any] | None) -> Iterator[None]:
    parent = propagate.extract(meta) if meta is not None else None
    tracer = provider().get_tracer(__name__)
    attributes = {"messaging.system": "rq", "messaging.operation.type": "process",
                  "messaging.destination.name": QUEUE, "messaging.message.id": job_id,
                  "memory.job.kind": kind, "memory.job.attempt": attempt}
    with tracer.start_as_current_span(f"process {QUEUE}", context=parent,
                                      kind=trace.SpanKind.CONSUMER, attributes=attributes):
        yield


def flush() -> None:
    if _provider is not None:
        _provider.force_flush()
