"""Transient LLM failures retry with backoff; timeouts, refusals and bad output do not (seed §9)."""

from __future__ import annotations

import threading
import time

import pytest
from rq.job import JobStatus

from tests.completions import SESSION_ID, USER_ID, capture_on, event, only_outcome, rq_job, rq_queue
from tests.conftest import assert_ok

FACT = "输出报告用中文"


@pytest.fixture
def job(app, llm, webhook, run_jobs, memories):
    """`job(**config)`: enqueue one extraction, run it (retries included), return its outcome."""
    capture_on(app)

    def run(**config) -> dict:
        app.config.update(config)
        assert assert_ok(webhook(event()), 202)["enqueued"] is True
        run_jobs()
        return only_outcome(app)

    return run


def rq_status(app, outcome: dict) -> JobStatus:
    return rq_job(app, outcome["jobId"]).get_status()


def test_transient_errors_are_retried_with_backoff_then_succeed(app, job, llm, memories):
    llm.reply(status=429)
    llm.reply(status=500)
    llm.reply_items([{"type": "user", "content": FACT}])
    outcome = job(MEMORY_RETRY_DELAYS_S=(2, 2))
    assert (outcome["status"], outcome["attempts"], outcome["inserted"]) == ("succeeded", 3, 1)
    first, second, third = llm.requests
    # RQ schedules in whole seconds, so a 2 s delay is at least one second.
    assert second.started - first.ended >= 1 and third.started - second.ended >= 1
    assert memories.count(USER_ID, content=FACT) == 1
    assert rq_status(app, outcome) == JobStatus.FINISHED


@pytest.mark.parametrize("failure", [{"status": 502}, {"status": 503}, {"disconnect": True}])
def test_5xx_and_dropped_connections_are_transient(job, llm, failure):
    llm.reply(**failure)
    llm.reply_items([])
    outcome = job(MEMORY_RETRY_DELAYS_S=(0,))
    assert (outcome["status"], outcome["attempts"]) == ("succeeded", 2)
    assert len(llm.requests) == 2


def test_a_job_out_of_retries_fails(app, job, llm):
    llm.reply(status=500)
    llm.reply(status=503)
    outcome = job(MEMORY_RETRY_DELAYS_S=(0,))
    assert (outcome["status"], outcome["reason"], outcome["attempts"]) == \
        ("failed", "llm_unavailable", 2)
    assert len(llm.requests) == 2
    assert rq_status(app, outcome) == JobStatus.FAILED


def test_a_timeout_is_abandoned_not_retried(job, llm, memories):
    llm.reply('[{"type": "user", "content": "太迟的答案"}]', delay=2)
    outcome = job(MEMORY_LLM_TIMEOUT_S=0.5, MEMORY_RETRY_DELAYS_S=(0,))
    assert (outcome["status"], outcome["reason"], outcome["attempts"]) == \
        ("abandoned", "llm_timeout", 1)
    assert 500 <= outcome["durationMs"] < 2000
    assert len(llm.requests) == 1 and memories.count(USER_ID) == 0


@pytest.mark.parametrize("status", [400, 401, 404])
def test_a_refused_request_fails_without_retry(app, job, llm, status):
    llm.reply(status=status)
    outcome = job(MEMORY_RETRY_DELAYS_S=(0,))
    assert (outcome["status"], outcome["reason"], outcome["attempts"]) == \
        ("failed", "llm_rejected", 1)
    assert len(llm.requests) == 1
    assert rq_status(app, outcome) == JobStatus.FAILED


def test_invalid_output_is_abandoned_not_retried(job, llm):
    llm.reply("not json")
    outcome = job(MEMORY_RETRY_DELAYS_S=(0,))
    assert (outcome["status"], outcome["reason"]) == ("abandoned", "invalid_output")
    assert len(llm.requests) == 1


def _hold_session_lock(app, release: threading.Event) -> threading.Thread:
    """Hold the session's lock (as another job would) until `release` is set."""
    queue = app.extensions["memory_queue"]
    held = threading.Event()

    def hold() -> None:
        with queue.session_lock(SESSION_ID, "another-job"):
            held.set()
            release.wait(30)

    thread = threading.Thread(target=hold)
    thread.start()
    assert held.wait(5)
    return thread


def test_a_job_of_a_busy_session_is_put_back_without_holding_a_worker_or_an_attempt(
        app, job, llm):
    """SPEC §11: the job waits a moment for its session's lock, then goes back to RQ's
    scheduled registry (the worker is free meanwhile); run again once the other job is done,
    it is still its first attempt."""
    llm.reply_items([])
    release = threading.Event()
    holder = _hold_session_lock(app, release)
    scheduled = rq_queue(app).scheduled_job_registry
    released_at = []

    def release_once_put_back() -> None:
        deadline = time.monotonic() + 20
        while scheduled.count == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        released_at.append(time.monotonic())
        release.set()

    threading.Thread(target=release_once_put_back).start()
    outcome = job(MEMORY_RETRY_DELAYS_S=(60,))
    holder.join()
    assert (outcome["status"], outcome["attempts"]) == ("succeeded", 1)
    assert len(llm.requests) == 1 and llm.requests[0].started >= released_at[0]


def test_a_database_connection_lost_under_a_job_is_a_transient_failure():
    """A node lost or a restart: nothing of the attempt committed, the next one reconnects."""
    import sqlalchemy as sa

    from app.extraction.runner import _transient_reason

    lost = sa.exc.OperationalError("SELECT 1", None, Exception(2013, "Lost connection"),
                                   connection_invalidated=True)
    assert _transient_reason(lost) == "database_unavailable"
    assert _transient_reason(sa.exc.OperationalError("SELECT 1", None, Exception(1146))) is None
