"""The extraction job as the queue runs it: session lock, one transaction, retries, outcome.

Same code under RQ (through `jobs.extraction`) and in the embedded thread. The memory changes
and the outcome row commit together while the session lock is held; any failure rolls the
changes back and records a failed outcome on its own. Transient trouble (LLM connection, 429,
5xx; the session lock held too long) asks the queue for another attempt after a backoff
delay, without an outcome until the last attempt.
"""

from __future__ import annotations

import logging
from typing import Any

from flask import current_app

from app.extensions import db
from app.extraction import pipeline
from app.extraction.llm import LlmError, LlmTransientError
from app.extraction.outcomes import Outcome, OutcomeStatus, record
from app.extraction.queue import EXTRACTION, JobResult, SessionBusy, memory_queue

log = logging.getLogger(__name__)


def retry_delay(attempt: int) -> int | None:
    """Seconds before attempt `attempt + 1`, or None when `attempt` was the last one."""
    delays = current_app.config["MEMORY_RETRY_DELAYS_S"]
    return delays[attempt - 1] if attempt <= len(delays) else None


def _fail(outcome: Outcome, reason: str) -> None:
    """After the rollback: the failed outcome, in a transaction of its own."""
    outcome.finish(OutcomeStatus.FAILED, reason)
    try:
        record(outcome)
    except Exception:
        db.session.rollback()
        log.exception("event=job.outcome_lost kind=%s job=%s", outcome.kind, outcome.job_id)


def run_extraction(payload: dict[str, Any], attempt: int, job_id: str) -> JobResult:
    """One attempt of an extraction job."""
    job = pipeline.ExtractionJob.from_payload(payload)
    outcome = Outcome(kind=EXTRACTION.name, job_id=job_id, user_id=job.user_id,
                      attempts=attempt, event_id=job.event_id, session_id=job.session_id)
    try:
        with memory_queue().session_lock(job.session_id):
            pipeline.extract(job, outcome)
            outcome.stage()
            db.session.commit()
    except (LlmTransientError, SessionBusy) as exc:
        db.session.rollback()
        reason = exc.reason
        delay = retry_delay(attempt)
        if delay is not None:
            log.warning("event=job.retry kind=%s job=%s user=%s session=%s attempt=%d "
                        "reason=%s retry_in_s=%d", EXTRACTION.name, job_id, job.user_id,
                        job.session_id, attempt, reason, delay)
            return JobResult(retry_in=delay)
        _fail(outcome, reason)
        raise
    except LlmError as exc:
        db.session.rollback()
        _fail(outcome, exc.reason)
        raise
    except Exception:
        db.session.rollback()
        _fail(outcome, "internal_error")
        raise
    # Committed: from here on `outcome.persisted` says whether this run taught the memories
    # something new.
    outcome.log()
    return JobResult()
