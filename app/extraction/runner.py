"""The jobs as the queue runs them: their transactions, retries and the outcome.

This is the job side's transaction boundary (the web request's is the service call): the same
code runs under RQ (through `jobs/`) and in the embedded thread. An extraction holds its
session's lock; it reads its inputs in one round trip of the read engine, in no transaction (an
AUTOCOMMIT connection), asks the model with none open, then applies the answer and records the
outcome in one transaction, so the job changes everything it decided or nothing. Once that
committed something new, it may start a D15 consolidation (`trigger`), which works on one group
and commits its changes with its outcome the same way. Any failure rolls the changes back and
records a failed outcome on its own. Transient trouble (LLM connection, 429, 5xx; the session
lock held too long; a conflict with another transaction that outlived its retries; a database
connection lost under the job) asks the queue for another attempt after a backoff delay, without
an outcome until the last attempt. Redis blinking under a job (the session lock, the context
cache's mark) is waited out within the attempt, for up to REDIS_PATIENCE_S — the queue itself
needs Redis to carry a retry — and is then a transient failure like the others.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from flask import current_app
from redis.exceptions import RedisError
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from app.database.conflicts import is_conflict, is_unavailable
from app.extraction import consolidation, llm, parser, pipeline, trigger
from app.extraction.llm import LlmError, LlmTransientError
from app.extraction.models import JobOutcome
from app.extraction.outcomes import JobKindName, Outcome, OutcomeStatus, record
from app.extraction.queue import SESSION_BUSY_DELAY_S, JobResult, SessionBusy, memory_queue
from app.memory import repository, rules
from app.memory.memories import GroupChanged
from app.memory.repository import Known
from app.memory.rules import USER_GROUP, Group
from app.unit_of_work import UnitOfWork

log = logging.getLogger(__name__)

REDIS_PATIENCE_S = 30.0
# How much later a job whose failed outcome the database could not take runs again.
OUTCOME_UNWRITTEN_DELAY_S = 10


class AlreadyDone(Exception):
    """The job's outcome exists: nothing to do, nothing to record."""


def retry_delay(attempt: int) -> int | None:
    """Seconds before attempt `attempt + 1`, or None when `attempt` was the last one."""
    delays = current_app.config["MEMORY_RETRY_DELAYS_S"]
    return delays[attempt - 1] if attempt <= len(delays) else None


def _fail(outcome: Outcome, reason: str) -> bool:
    """After the rollback: the failed outcome, in a transaction of its own. False when the
    database could not take it (unreachable, or gone under it): the job must run again."""
    outcome.finish(OutcomeStatus.FAILED, reason)
    try:
        record(outcome)
    except Exception as exc:
        if is_unavailable(exc):
            log.warning("event=job.outcome_unwritten kind=%s job=%s reason=%s retry_in_s=%d",
                        outcome.kind, outcome.job_id, reason, OUTCOME_UNWRITTEN_DELAY_S)
            return False
        log.exception("event=job.outcome_lost kind=%s job=%s", outcome.kind, outcome.job_id)
    return True


def _transient_reason(exc: BaseException) -> str | None:
    """Why `exc` is worth another attempt later, or None."""
    if isinstance(exc, (LlmTransientError, pipeline.InputsUnreadable)):
        return exc.reason
    if isinstance(exc, RedisError):
        return "redis_unavailable"
    if is_conflict(exc):
        return "database_conflict"
    if is_unavailable(exc):
        # The database went away under the job, or would not take its connection (a restart,
        # a cluster node lost): nothing of this attempt committed, and the next one reconnects.
        # Not a failure of the job, whose failed outcome could not be written either.
        return "database_unavailable"
    return None


def _patient(outcome: Outcome, work: Callable[[], None]) -> None:
    """`work`, run again while Redis is unreachable, for up to REDIS_PATIENCE_S: each run
    rolled back whatever it had begun, and nothing is held while it waits."""
    deadline = time.monotonic() + REDIS_PATIENCE_S
    wait = 0.25
    while True:
        try:
            work()
            return
        except RedisError as exc:
            if time.monotonic() + wait > deadline:
                raise
            log.warning("event=job.redis_wait kind=%s job=%s error=%s wait_s=%.2f",
                        outcome.kind, outcome.job_id, type(exc).__name__, wait)
            time.sleep(wait)
            wait = min(wait * 2, 4.0)


def _attempt(outcome: Outcome, attempt: int, work: Callable[[], None]) -> JobResult:
    """Run one attempt's `work` (which commits its changes with the outcome, or rolls back) and
    turn its failures into a retry or a failed outcome."""
    try:
        _patient(outcome, work)
    except AlreadyDone:
        raise
    except SessionBusy:
        # Another job of the session runs: put back for a moment later, not an attempt, and
        # no worker waits on the lock meanwhile (SPEC §11 "Workers").
        log.info("event=job.deferred kind=%s job=%s session=%s reason=session_busy "
                 "retry_in_s=%d", outcome.kind, outcome.job_id, outcome.session_id,
                 SESSION_BUSY_DELAY_S)
        return JobResult(retry_in=SESSION_BUSY_DELAY_S, deferred=True)
    except Exception as exc:
        reason = _transient_reason(exc)
        if reason is not None:
            delay = retry_delay(attempt)
            if delay is not None:
                log.warning("event=job.retry kind=%s job=%s user=%s session=%s attempt=%d "
                            "reason=%s retry_in_s=%d", outcome.kind, outcome.job_id,
                            outcome.user_id, outcome.session_id, attempt, reason, delay)
                return JobResult(retry_in=delay)
        elif isinstance(exc, LlmError):
            reason = exc.reason
        if not _fail(outcome, reason or "internal_error"):
            # Nothing of the attempt committed and no outcome says how it ended: the same
            # attempt again later, never an accepted delivery without an outcome (SPEC §11).
            return JobResult(retry_in=OUTCOME_UNWRITTEN_DELAY_S, deferred=True)
        raise
    outcome.log()
    return JobResult()


def run_extraction(payload: dict[str, Any], attempt: int, job_id: str) -> JobResult:
    """One attempt of an extraction job."""
    job = pipeline.ExtractionJob.from_payload(payload)
    outcome = Outcome(kind=JobKindName.EXTRACTION, job_id=job_id, user_id=job.user_id,
                      attempts=attempt, event_id=job.event_id, session_id=job.session_id)

    consolidation_due = False
    # Once the model has answered: its answer and the outcome as it was then. Work done again
    # after Redis blinked (`_patient`) applies the same answer instead of asking anew.
    answered: tuple[pipeline.Inputs | None, parser.Parsed | None, Outcome] | None = None

    def work() -> None:
        nonlocal consolidation_due, answered
        with memory_queue().session_lock(job.session_id, job_id):
            if answered is None:
                # Read outside any transaction (one round trip): nothing stays open while the
                # model thinks.
                inputs = pipeline.read_inputs(job, outcome)
                parsed = pipeline.ask_model(inputs, outcome) if inputs is not None else None
                answered = inputs, parsed, outcome.snapshot()
            inputs, parsed, asked = answered
            outcome.rewind(asked)
            with UnitOfWork() as uow:
                if inputs is not None and parsed is not None:
                    pipeline.hand_over(uow, job, inputs, parsed, outcome)
                outcome.stage(uow)
                _commit_once(uow, job_id)
            # D15 waits for new information; within its cooldown (most of the time for a user
            # with enough memories), or with too few memories to be over any target, nothing
            # more is asked after the commit.
            consolidation_due = (inputs is not None and outcome.persisted
                                 and not inputs.cooling_down
                                 and trigger.may_be_due(outcome.active))

    try:
        result = _attempt(outcome, attempt, work)
    except AlreadyDone:
        log.info("event=job.already_done kind=%s job=%s", outcome.kind, job_id)
        return JobResult()
    if consolidation_due:
        _consolidate_if_due(job.user_id, outcome.written_groups)
    return result


def _commit_once(uow: UnitOfWork, job_id: str) -> None:
    """Commit a job's changes with its outcome. A job queued twice (its event's row lost after
    the enqueue, the platform delivering it again) finds its outcome taken by the first run at
    this point: the unique job id rolls the second run back whole."""
    try:
        uow.commit()
    except IntegrityError:
        uow.rollback()
        if JobOutcome.recorded(job_id):
            raise AlreadyDone from None
        raise


def _consolidate_if_due(user_id: int, written_groups: set[Group]) -> None:
    """The D15 trigger, in a transaction of its own. The extraction is committed already: a
    failure here is logged and costs nothing but this consolidation."""
    try:
        with UnitOfWork() as uow:
            if trigger.after_extraction(user_id, written_groups):
                uow.commit()
    except (SQLAlchemyError, RedisError) as exc:
        log.warning("event=consolidation.trigger_failed user=%s error=%s", user_id,
                    type(exc).__name__)


def run_consolidation(payload: dict[str, Any], attempt: int, job_id: str) -> JobResult:
    """One attempt of a consolidation job (one group of one user)."""
    job = consolidation.ConsolidationJob.from_payload(payload)
    outcome = Outcome(kind=JobKindName.CONSOLIDATION, job_id=job_id, user_id=job.user_id,
                      attempts=attempt, scope=job.group.scope.value,
                      project_key=job.group.project_key)

    answered: tuple[Any, Any, Outcome] | None = None  # as for an extraction

    def work() -> None:
        nonlocal answered
        if answered is None:
            with UnitOfWork():
                inputs = consolidation.read_inputs(job, outcome)
            plan = consolidation.ask_model(inputs, outcome) if inputs is not None else None
            answered = inputs, plan, outcome.snapshot()
        inputs, plan, asked = answered
        outcome.rewind(asked)
        with UnitOfWork() as uow:
            if inputs is not None and plan is not None:
                try:
                    consolidation.hand_over(uow, job, inputs, plan, outcome)
                except GroupChanged as exc:
                    uow.rollback()  # nothing of the plan stays; the outcome still goes in
                    outcome.finish(OutcomeStatus.ABANDONED, exc.reason)
            outcome.stage(uow)
            uow.commit()

    return _attempt(outcome, attempt, work)


def warm_up() -> None:
    """Rehearse an extraction for a user that does not exist, and roll all of it back.

    SQLAlchemy compiles a statement the first time a process runs it, and a forked work horse
    compiles into a cache that dies with it. The worker calls this before it forks, so every
    horse starts with an extraction's statements compiled (the worker bench: ~20 ms less per
    forked job). It runs the pipeline's own steps, not copies of their statements.
    """
    nobody = 0
    job = pipeline.ExtractionJob(nobody, session_id=0, event_id=None, project_key="warm-up",
                                 user_message="warm-up " * rules.EXTRACT_MIN_USER_MESSAGE,
                                 assistant_message="warm-up")
    outcome = Outcome(kind=JobKindName.EXTRACTION, job_id="warm-up", user_id=nobody,
                      attempts=1)
    with UnitOfWork() as uow:  # never committed
        # The job's reads go through the read engine, outside this transaction: they compile their
        # statements and find nobody's switch off. What the model is shown in the second round
        # is what the first wrote, read back in this transaction.
        pipeline.read_inputs(job, outcome)
        project_group = Group(job.project_key)
        inputs = pipeline.Inputs(llm.ChatModel(0, "warm-up", "warm-up", None, None),
                                 project_group, comparison=[], dismissed=[], messages=[])
        # Two rounds, as the model would answer them: insert a fact of each group, then touch
        # and reword what the first round wrote.
        for answer in (lambda ids: [{"type": "user", "content": "warm-up"},
                                    {"type": "project", "content": "warm-up"}],
                       lambda ids: [{"type": "user", "action": "touch", "existingId": ids[0]},
                                    {"type": "project", "action": "update",
                                     "existingId": ids[-1], "content": "warm-up again"}]):
            ids = [known.id for known in inputs.comparison] or [0]
            parsed = parser.parse(json.dumps(answer(ids)))
            pipeline.hand_over(uow, job, inputs, parsed, outcome)
            inputs = replace(inputs, comparison=[
                Known(row.id, group, row.content, row.version)
                for group in (USER_GROUP, project_group)
                for row in repository.machine_rows(nobody, group)])
        trigger.groups_due(nobody, outcome.written_groups)
        outcome.stage(uow)
        uow.flush()
