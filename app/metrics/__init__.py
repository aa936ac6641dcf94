"""The service's Prometheus metrics (prometheus-client, multiprocess mode), counted when things
happen: a job's outcome as it is recorded, a webhook delivery as it is answered.

Every process of one installation on a host — gunicorn's workers, `flask worker` processes and
their work horses, the embedded `serve` — writes its samples to files in one directory, and
`/metrics` (`app.metrics.exposition`) sums them. The directory is PROMETHEUS_MULTIPROC_DIR, by
default `memory-service-metrics-<uid>` in the system's temporary directory: the same for every
process of the user the service runs as, with no setting, and emptied when the host restarts.
Counters there survive the restart of any one process.

A forked work horse writes to the file its worker's horses share, not to one of its own: one
file per worker process instead of one per job, so a scrape reads as many files however many
jobs ran (`as_work_horse`).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

DIRECTORY_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"
# Decided before prometheus_client is imported: it picks multiprocess mode on import.
os.environ.setdefault(DIRECTORY_VARIABLE, str(
    Path(tempfile.gettempdir()) / f"memory-service-metrics-{os.getuid()}"))
Path(os.environ[DIRECTORY_VARIABLE]).mkdir(parents=True, exist_ok=True)

from prometheus_client import Counter, Histogram, values  # noqa: E402

_horse_of: int | None = None


def _process_file_id() -> str:
    """Which file this process's samples go to (prometheus_client asks before every write)."""
    return f"horses-of-{_horse_of}" if _horse_of is not None else str(os.getpid())


values.ValueClass = values.MultiProcessValue(process_identifier=_process_file_id)


def as_work_horse() -> None:
    """From now on this process is an RQ work horse: its samples go to the file of its
    worker's horses, which run one at a time, each opening it anew."""
    global _horse_of
    _horse_of = os.getppid()


def directory() -> str:
    return os.environ[DIRECTORY_VARIABLE]


# Job durations in seconds: a skipped job takes milliseconds, an LLM call seconds.
DURATION_BUCKETS_S = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)

JOBS = Counter("memory_jobs", "Finished jobs by kind, status and reason.",
               ["kind", "status", "reason"])
JOB_DURATION = Histogram("memory_job_duration_seconds", "Wall time of finished jobs.", ["kind"],
                         buckets=DURATION_BUCKETS_S)
LLM_TOKENS = Counter("memory_llm_tokens", "Tokens the LLM reported, by job kind, model and type.",
                     ["kind", "model", "type"])
CONSOLIDATION_ROWS = Counter("memory_consolidation_rows",
                             "Machine-made rows D15 consolidation read (in) and left (out).",
                             ["direction"])
CONSOLIDATION_OPERATIONS = Counter("memory_consolidation_operations",
                                   "Merges and drops D15 consolidation applied.", ["op"])
WEBHOOK_EVENTS = Counter("memory_webhook_events",
                         "Completion webhook deliveries, by the webhook's answer.", ["reason"])
