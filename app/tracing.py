"""OpenTelemetry traces, asked for by the standard variables alone (SPEC §11 "Tracing and
logs"): `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) or
`OTEL_TRACES_EXPORTER`; every other `OTEL_*` variable (service name, headers, sampler, batch
sizes) is read by the SDK as it documents. `OTEL_SERVICE_NAME` defaults to `memory-service`.

Unset, this module is all there is: no `opentelemetry` module is imported, no middleware is
added, and the hooks below cost one test of a global. Set, `app.otel` instruments the process
with the ecosystem's packages — Flask, SQLAlchemy, Redis — and the model call as a span of the
GenAI semantic conventions, traces the two hot paths (which bypass Flask) with the WSGI
middleware, and carries the
request's trace context in each job's `job.meta`, so one completion is one trace: the webhook
request, the job, its statements and the model call.

The hooks also carry the request id of `app.logs` into the job, traced or not.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from types import ModuleType
from typing import TYPE_CHECKING, Any

from app import logs

if TYPE_CHECKING:
    from wsgiref.types import WSGIApplication

    from flask import Flask

# Either asks for traces (SPEC §11).
ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
EXPORTER_VARIABLE = "OTEL_TRACES_EXPORTER"

# `app.otel` once this process traces; None: tracing is off and costs nothing.
_otel: ModuleType | None = None


def wanted(env: Mapping[str, str] = os.environ) -> bool:
    """The environment asks for traces (and the SDK is not disabled)."""
    if (env.get("OTEL_SDK_DISABLED") or "").strip().lower() == "true":
        return False
    exporter = (env.get(EXPORTER_VARIABLE) or "").strip().lower()
    if exporter:
        return exporter != "none"
    return any(env.get(name) for name in ENDPOINT_VARIABLES)


def init_app(app: Flask) -> None:
    """Trace this process and `app`'s requests when the environment asks for it. Called before
    the hot paths are installed: the Flask instrumentation wraps Flask's own WSGI callable."""
    global _otel
    if not wanted():
        return
    from app import otel

    otel.instrument_app(app)
    _otel = otel


def enabled() -> bool:
    return _otel is not None


def traced_wsgi(endpoint: WSGIApplication) -> WSGIApplication:
    """A hot path's endpoint, traced as a server span when tracing is on."""
    return endpoint if _otel is None else _otel.traced_wsgi(endpoint)


class _Untraced:
    def answered(self, response: object, input_tokens: int | None,
                 output_tokens: int | None) -> None:
        pass


_UNTRACED = _Untraced()


def model_call(model: str, base_url: str | None) -> AbstractContextManager[Any]:
    """Around the one chat completion (`app.extraction.llm.complete`): a GenAI client span when
    tracing is on; `.answered(response, input_tokens, output_tokens)` adds what came back."""
    return nullcontext(_UNTRACED) if _otel is None else _otel.model_call(model, base_url)


def sql_batch(connection: Any, texts: Sequence[str]) -> AbstractContextManager[object]:
    """Around `app.database.batches`' one round trip of several statements (`texts`, compiled,
    with placeholders), which passes by SQLAlchemy's execution and so by its instrumentation."""
    return nullcontext() if _otel is None else _otel.sql_batch(connection, texts)


def job_meta() -> dict[str, Any]:
    """What a job enqueued now carries in `job.meta`: the request id and the trace context."""
    meta: dict[str, Any] = logs.job_meta()
    if _otel is not None:
        _otel.inject(meta)
    return meta


@contextmanager
def job_span(kind: str, job_id: str, attempt: int,
             meta: Mapping[str, Any] | None = None) -> Iterator[None]:
    """One attempt of a job: its lines carry the request id of `meta`, and with tracing on it
    is a span in the trace `meta` carries (none: the current context's, as in the embedded
    queue, which runs the job in a copy of the request's context)."""
    with logs.bound(meta):
        if _otel is None:
            yield
        else:
            with _otel.job_span(kind, job_id, attempt, meta):
                yield


def flush() -> None:
    """Export what is buffered now: a work horse ends with `os._exit`, which runs no exit hook."""
    if _otel is not None:
        _otel.flush()
