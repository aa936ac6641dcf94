"""Prometheus metrics at `/metrics`, computed from the database at scrape time.

Outcomes and webhook events are rows, so the numbers are the same whichever web process is
scraped and however many workers wrote them; a restart resets nothing.
"""

from __future__ import annotations

from collections.abc import Iterable

from flask import Blueprint, Response

from app.extraction.models import JobOutcome, WebhookEvent
from app.extraction.outcomes import JobKindName

bp = Blueprint("metrics", __name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# Job durations in seconds: a skipped job takes milliseconds, an LLM call seconds.
DURATION_BUCKETS_S = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)


def _escape(value: object) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(**labels: object) -> str:
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items()) + "}"


def _family(name: str, kind: str, help_text: str, samples: Iterable[str]) -> list[str]:
    return [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", *samples]


def render() -> str:
    """The exposition text."""
    lines = _family(
        "memory_jobs_total", "counter", "Finished jobs by kind, status and reason.",
        (f"memory_jobs_total{_labels(kind=k, status=s, reason=r)} {n}"
         for k, s, r, n in JobOutcome.counts()))

    bounds_ms = [int(b * 1000) for b in DURATION_BUCKETS_S]
    histogram = []
    for kind, *cumulative, total_ms, count in JobOutcome.duration_histogram(bounds_ms):
        for bound, observed in zip(DURATION_BUCKETS_S, cumulative, strict=True):
            histogram.append(f"memory_job_duration_seconds_bucket"
                             f"{_labels(kind=kind, le=bound)} {int(observed or 0)}")
        histogram += [
            f"memory_job_duration_seconds_bucket{_labels(kind=kind, le='+Inf')} {count}",
            f"memory_job_duration_seconds_sum{_labels(kind=kind)} {int(total_ms or 0) / 1000}",
            f"memory_job_duration_seconds_count{_labels(kind=kind)} {count}",
        ]
    lines += _family("memory_job_duration_seconds", "histogram",
                     "Wall time of finished jobs.", histogram)

    tokens = []
    for kind, model, prompt, completion in JobOutcome.token_totals():
        tokens += [f"memory_llm_tokens_total{_labels(kind=kind, model=model, type='prompt')} "
                   f"{prompt}",
                   f"memory_llm_tokens_total{_labels(kind=kind, model=model, type='completion')}"
                   f" {completion}"]
    lines += _family("memory_llm_tokens_total", "counter",
                     "Tokens the LLM reported, by job kind, model and type.", tokens)

    rows_in, rows_out, merges, drops = JobOutcome.consolidation_totals(JobKindName.CONSOLIDATION)
    lines += _family("memory_consolidation_rows_total", "counter",
                     "Machine-made rows D15 consolidation read (in) and left (out).",
                     [f"memory_consolidation_rows_total{_labels(direction='in')} {rows_in}",
                      f"memory_consolidation_rows_total{_labels(direction='out')} {rows_out}"])
    lines += _family("memory_consolidation_operations_total", "counter",
                     "Merges and drops D15 consolidation applied.",
                     [f"memory_consolidation_operations_total{_labels(op='merge')} {merges}",
                      f"memory_consolidation_operations_total{_labels(op='drop')} {drops}"])

    lines += _family(
        "memory_webhook_events_total", "counter",
        "Distinct completion events recorded by the webhook, by its answer.",
        (f"memory_webhook_events_total{_labels(reason=r)} {n}"
         for r, n in WebhookEvent.counts_by_reason()))
    return "\n".join(lines) + "\n"


@bp.get("/metrics")
def metrics():
    """Job outcomes per kind/status/reason, job durations, LLM tokens, consolidation rows and
    operations, webhook decisions."""
    return Response(render(), content_type=CONTENT_TYPE)
