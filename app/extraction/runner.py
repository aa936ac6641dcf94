"""The jobs as the queue runs them: one transaction, retries, the outcome.

Same code under RQ (through `jobs/`) and in the embedded thread. An extraction holds its
session's lock; its memory changes and its outcome commit together, and once committed with
something new it may start a D15 consolidation (`trigger`). A consolidation works on one group
and commits its changes with its outcome the same way. Any failure rolls the changes back and
records a failed outcome on its own. Transient trouble (LLM connection, 429, 5xx; the session
lock held too long) asks the queue for another attempt after a backoff delay, without an outcome
until the last attempt.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from flask import current_app

from app.extensions import db
from app.extraction import consolidation, pipeline, trigger
from app.extraction.llm import LlmError, LlmTransientError
from app.extraction.outcomes import Outcome, OutcomeStatus, record
from app.extraction.queue import CONSOLIDATION, EXTRACTION, JobResult, SessionBusy, memory_queue

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


def _attempt(outcome: Outcome, attempt: int, work: Callable[[], None]) -> JobResult:
    """Run one attempt's `work` (which commits its changes with the outcome) and turn its
    failures into a retry or a failed outcome."""
    try:
        work()
    except (LlmTransientError, SessionBusy) as exc:
        db.session.rollback()
        reason = exc.reason
        delay = retry_delay(attempt)
        if delay is not None:
            log.warning("event=job.retry kind=%s job=%s user=%s session=%s attempt=%d "
                        "reason=%s retry_in_s=%d", outcome.kind, outcome.job_id,
                        outcome.user_id, outcome.session_id, attempt, reason, delay)
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
    outcome.log()
    return JobResult()


def run_extraction(payload: dict[str, Any], attempt: int, job_id: str) -> JobResult:
    """One attempt of an extraction job."""
    job = pipeline.ExtractionJob.from_payload(payload)
    outcome = Outcome(kind=EXTRACTION.name, job_id=job_id, user_id=job.user_id,
                      attempts=attempt, event_id=job.event_id, session_id=job.session_id)

    def work() -> None:
        with memory_queue().session_lock(job.session_id):
            pipeline.extract(job, outcome)
            outcome.stage()
            db.session.commit()

    result = _attempt(outcome, attempt, work)
    # Committed: `outcome.persisted` says whether this run taught the memories something new,
    # which is what D15 waits for.
    if outcome.persisted:
        trigger.after_extraction(job.user_id, outcome.written_groups)
    return result


def run_consolidation(payload: dict[str, Any], attempt: int, job_id: str) -> JobResult:
    """One attempt of a consolidation job (one group of one user)."""
    job = consolidation.ConsolidationJob.from_payload(payload)
    outcome = Outcome(kind=CONSOLIDATION.name, job_id=job_id, user_id=job.user_id,
                      attempts=attempt, scope=job.scope.value, project_key=job.project_key)

    def work() -> None:
        consolidation.consolidate(job, outcome)
        outcome.stage()
        db.session.commit()

    return _attempt(outcome, attempt, work)
