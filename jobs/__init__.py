"""RQ entry points (thin: ids and payloads in, `app.extraction` does the work) and the worker.

RQ imports the entry points by dotted path; each one runs inside the app context the worker
class (`jobs.worker`) pushes around every job.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rq import Retry, get_current_job

from app.extraction.queue import JobResult


def run_current(run: Callable[[dict[str, Any], int, str], JobResult],
                payload: dict[str, Any]) -> Retry | None:
    """Run one attempt of the RQ job being performed; a wish to retry becomes RQ's Retry."""
    job = get_current_job()
    attempt = (job.number_of_retries or 0) + 1
    result = run(payload, attempt, job.id)
    if result.retry_in is None:
        return None
    # The job owns the policy (how many attempts, how long between them); RQ only carries out
    # this one delay, so `max` just has to stay above the retries RQ has counted so far.
    return Retry(max=attempt, interval=result.retry_in)
