"""The service's Prometheus metrics (prometheus-client, multiprocess mode), counted when things
happen: a job's outcome as it is recorded, a webhook delivery as it is answered.

Every process of one installation on a host — gunicorn's workers, `flask worker` processes and
their work horses, the embedded `serve` — writes its samples to files in one directory, and
`/metrics` (`app.metrics.exposition`) sums them. The directory is PROMETHEUS_MULTIPROC_DIR, by
default one per installation: `memory-service-metrics-<uid>-<key>` in the system's temporary
directory, where the key is a hash of DATABASE_URL (the database is what makes an installation:
its web and worker processes share it, two installations on one host never do). Without
DATABASE_URL (the embedded SQLite file) the key is the checkout's path. Counters there survive
the restart of any one process.

prometheus-client's multiprocess mode needs the directory cleaned when the installation starts,
or files of processes from an earlier run (whose pid a new process may get) are summed in. The
process that starts the installation — gunicorn's master (`gunicorn.conf.py`), `serve` — calls
`clean_stale_files`, which removes the files of processes no longer running, so the worker
processes of the same installation, which run on, keep their counts.

A forked work horse writes to the file its worker's horses share, not to one of its own: one
file per worker process instead of one per job, so a scrape reads as many files however many
jobs ran (`as_work_horse`).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

DIRECTORY_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"
# The checkout, which holds the embedded setup's instance/ (and its SQLite file).
CHECKOUT = Path(__file__).resolve().parents[2]


def default_directory(environ: Mapping[str, str] = os.environ) -> Path:
    """The installation's own directory: keyed by DATABASE_URL, else by the checkout."""
    installation = environ.get("DATABASE_URL") or f"embedded:{CHECKOUT}"
    key = hashlib.sha256(installation.encode("utf-8")).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"memory-service-metrics-{os.getuid()}-{key}"


# Decided before prometheus_client is imported: it picks multiprocess mode on import.
if not os.environ.get(DIRECTORY_VARIABLE):
    os.environ[DIRECTORY_VARIABLE] = str(default_directory())
# Owner-only: the files say how busy the service is, nothing another user needs.
Path(os.environ[DIRECTORY_VARIABLE]).mkdir(mode=0o700, parents=True, exist_ok=True)

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


def _writer_pid(sample_file: Path) -> int | None:
    """The pid whose process writes `sample_file`: `<type>_<pid>.db`, or
    `<type>_horses-of-<worker pid>.db` for a worker's work horses (`as_work_horse`)."""
    identifier = sample_file.stem.rsplit("_", 1)[-1].removeprefix("horses-of-")
    return int(identifier) if identifier.isdigit() else None


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process holds that pid now
    return True


def clean_stale_files(path: str | None = None) -> list[str]:
    """Remove the sample files of processes no longer running (prometheus-client's multiprocess
    mode wants a clean directory at start); the names removed. Only the process that starts
    the installation calls this, once."""
    removed = []
    for sample_file in sorted(Path(path or directory()).glob("*.db")):
        pid = _writer_pid(sample_file)
        if pid is None or not _running(pid):
            sample_file.unlink(missing_ok=True)
            removed.append(sample_file.name)
    return removed


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
REDIS_UNCONFIRMED_WRITES = Counter(
    "memory_redis_unconfirmed_writes",
    "Writes that must reach a Redis replica before a commit (a job, a context version bump), "
    "made while the master had no replica to confirm them: a failover now could lose them.")
