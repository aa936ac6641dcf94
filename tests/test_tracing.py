"""OpenTelemetry traces (SPEC §11 "Tracing and logs"), exported over OTLP/HTTP by gunicorn and a
worker to a real receiver (`tests.otlp_receiver`): one trace per completion, from the webhook
through the job to the model call and the statements; one per context read; nothing imported
when the variables are unset."""

from __future__ import annotations

import urllib.request

from app.platform.hot_path import HotPath, HotPaths
from tests.completions import capture_on, only_outcome
from tests.conftest import SERVICE_TOKEN, TEST_REDIS_URL, WEBHOOK_SECRET
from tests.otlp_receiver import Span, receiving
from tests.serving import gunicorn, modules_after_import_wsgi
from tests.test_logs import deliver
from tests.workers import worker_processes

WEBHOOK_SPAN = "POST /api/v1/webhooks/task-completed"
CONTEXT_SPAN = "GET /api/v1/internal/memory/context"


def _traced(endpoint: str, **env: str) -> dict[str, str]:
    # Batches leave every 50 ms instead of 5 s.
    return {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_BSP_SCHEDULE_DELAY": "50", **env}


def _named(spans: list[Span], name: str) -> list[Span]:
    return [span for span in spans if span.name == name]


def test_without_otel_variables_no_process_loads_the_tracing():
    """Neither the tracer SDK, an exporter, an instrumentation nor `app.otel`. (redis-py 8
    imports OpenTelemetry's metrics API and SDK itself when they are installed, as with the
    `otel` extra, for its own metrics, which stay off unless an application turns them on.)"""
    tracing_parts = ("opentelemetry.sdk.trace", "opentelemetry.exporter",
                     "opentelemetry.instrumentation", "opentelemetry.propagate", "app.otel")
    assert not {name for name in modules_after_import_wsgi()
                if name.startswith(tracing_parts)}


def test_without_otel_variables_no_request_passes_a_tracing_middleware(app):
    hot_paths = app.wsgi_app.app  # inside the request ids' middleware
    assert isinstance(hot_paths, HotPaths)
    assert all(isinstance(endpoint, HotPath) for endpoint in hot_paths.endpoints.values())
    # What opentelemetry-instrumentation-flask leaves on an app it wrapped.
    assert not hasattr(app, "_original_wsgi_app")


def test_one_signed_completion_is_one_trace_from_the_webhook_to_the_model_call(
        app, llm, tmp_path):
    capture_on(app)
    llm.reply_items([{"type": "user", "content": "输出报告用中文"}])
    with receiving() as receiver:
        env = _traced(receiver.url, REDIS_URL=TEST_REDIS_URL,
                      MEMORY_WEBHOOK_SECRET=WEBHOOK_SECRET)
        with gunicorn(tmp_path, "gunicorn", **env) as served:
            with deliver(served.url, "traced-1") as response:
                assert response.status == 202
            receiver.wait_for(lambda spans: _named(spans, WEBHOOK_SPAN), 30, "the webhook")
        with worker_processes(1, tmp_path, burst=True, **env) as (worker,):
            assert worker.wait(timeout=60) == 0
        spans = receiver.wait_for(lambda spans: _named(spans, "process memory"), 30, "the job")
    assert only_outcome(app)["status"] == "succeeded"

    (webhook,) = _named(spans, WEBHOOK_SPAN)
    trace = [span for span in spans if span.trace_id == webhook.trace_id]
    assert {span.service for span in trace} == {"memory-service"}
    # One attempt, or more on a busy machine (a retry is another attempt in the same trace).
    attempts = _named(trace, "process memory")
    assert attempts and all(job.parent_id == webhook.span_id for job in attempts)
    assert {job.attributes["memory.job.kind"] for job in attempts} == {"extraction"}
    model = [span for span in trace if span.attributes.get("gen_ai.operation.name") == "chat"][-1]
    assert model.parent_id in {job.span_id for job in attempts}
    assert model.attributes["gen_ai.request.model"] == "scripted-default"
    assert model.attributes["gen_ai.usage.input_tokens"] == 321
    assert model.attributes["gen_ai.usage.output_tokens"] == 12
    statements = [span for span in trace if "db.system" in span.attributes
                  or "db.system.name" in span.attributes]
    assert statements, "the job's and the webhook's SQL"
    # Nothing of this completion went to another trace.
    assert all(span.trace_id == webhook.trace_id for span in spans
               if span.name in ("process memory", WEBHOOK_SPAN))


def test_a_context_read_is_one_trace(app, tmp_path):
    with receiving() as receiver:
        with gunicorn(tmp_path, "gunicorn", **_traced(
                receiver.url, MEMORY_SERVICE_TOKEN=SERVICE_TOKEN)) as served:
            request = urllib.request.Request(
                served.url + "/api/v1/internal/memory/context?userId=1&projectKey=mao",
                headers={"Authorization": f"Bearer {SERVICE_TOKEN}"})
            with urllib.request.urlopen(request, timeout=10) as response:
                assert response.status == 200
            spans = receiver.wait_for(lambda spans: _named(spans, CONTEXT_SPAN), 30,
                                      "the context read")
    (read,) = _named(spans, CONTEXT_SPAN)
    assert read.kind == "SPAN_KIND_SERVER"
    assert read.attributes.get("http.response.status_code",
                               read.attributes.get("http.status_code")) == 200
    children = [span for span in spans if span.parent_id == read.span_id]
    assert children and all(span.trace_id == read.trace_id for span in children), spans
