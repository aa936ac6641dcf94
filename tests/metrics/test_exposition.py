"""`/metrics` (prometheus-client, multiprocess mode): what every process of the installation
counted, summed; webhook deliveries by every answer (SPEC §8 Operations). Job outcome metrics
are tested with the outcomes (tests/extraction/test_outcomes.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from app.metrics.exposition import render
from tests.completions import event
from tests.conftest import assert_ok

ROOT = Path(__file__).resolve().parent.parent.parent


def test_an_installation_that_ran_nothing_shows_no_job_samples(tmp_path):
    """A metrics directory no process wrote to: no sample (multiprocess mode exposes a family
    only once some process has written to it)."""
    text = render(str(tmp_path)).decode()
    assert "memory_jobs_total{" not in text and "_bucket{" not in text


def test_every_webhook_delivery_is_counted_by_its_answer_duplicates_included(app, webhook,
                                                                           metrics, client):
    body = event()
    for _ in range(3):
        assert_ok(webhook(body), 202)
    assert_ok(webhook(event(phase="FAILED")), 202)
    assert metrics.added("memory_webhook_events_total", reason="auto_capture_disabled") == 1
    assert metrics.added("memory_webhook_events_total", reason="duplicate_event") == 2
    assert metrics.added("memory_webhook_events_total", reason="phase_not_completed") == 1
    text = client.get("/metrics").get_data(as_text=True)
    for reason in ("enqueued", "phase_not_completed", "session_type_excluded",
                   "auto_capture_disabled", "duplicate_event"):
        assert f'memory_webhook_events_total{{reason="{reason}"}}' in text


def test_metrics_sum_what_every_process_counted(app, metrics):
    """Another process of the installation (a gunicorn worker, say) counts into the same
    directory; this process's /metrics includes it."""
    code = ("from app import metrics; "
            "metrics.JOBS.labels(kind='extraction', status='skipped', reason='elsewhere').inc(3)")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=60)
    assert metrics.added("memory_jobs_total", kind="extraction", status="skipped",
                         reason="elsewhere") == 3
