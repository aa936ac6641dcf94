"""The RQ worker of `flask --app wsgi worker`: every job runs inside the app's context.

The app context gives the job its config and a database session of its own; popping it removes
that session (Flask-SQLAlchemy's teardown), so each job starts clean. A job whose work horse is
killed cannot write its outcome: the worker process, which survives, writes it instead; a job
whose whole worker died gets it from RQ's failure callback when another worker finds it. Redis
going away does not end the worker: it waits, with a growing pause, and works on when Redis
answers again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import click
import redis
from flask import Flask, current_app
from flask.cli import with_appcontext
from rq import Queue, Retry, SimpleWorker, Worker, get_current_job
from rq.exceptions import AbandonedJobError
from rq.utils import now
from sqlalchemy.exc import SQLAlchemyError

from app import logs, metrics, redis_connection, tracing
from app.cli import log_to_stderr
from app.extensions import db
from app.extraction import llm, outcomes, runner
from app.extraction.queue import QUEUE_NAME, JobResult, Payload, memory_queue

log = logging.getLogger(__name__)

# The pause before the worker tries Redis again, doubling up to the longest.
REDIS_WAIT_S = (1.0, 30.0)


def run_current(run: Callable[[Payload, int, str], JobResult], payload: Payload) -> Retry | None:
    """Run one attempt of the RQ job being performed; a wish to retry becomes RQ's Retry."""
    job = get_current_job()
    attempt = (job.number_of_retries or 0) + 1
    result = run(payload, attempt, job.id)
    if result.retry_in is None:
        return None
    # The job owns the policy (how many attempts, how long between them); RQ only carries out
    # this one delay, so `max` just has to stay above the retries RQ has counted so far.
    return Retry(max=attempt, interval=result.retry_in)


def _record_lost(job: Any, reason: str) -> None:
    """A failed outcome for a job that could not write one itself, and its session's lock freed
    if it died holding it (needs the app context)."""
    kind, payload = job.meta.get("kind"), job.args[0] if job.args else None
    if kind is None or not isinstance(payload, dict):
        return
    if payload.get("session_id") is not None:
        memory_queue().release_dead_holder(payload["session_id"], job.id)
    ran_for_s = (now() - job.started_at).total_seconds() if job.started_at else 0.0
    outcomes.record_lost(kind, job.id, payload, attempts=(job.number_of_retries or 0) + 1,
                         reason=reason, ran_for_s=ran_for_s)


def record_abandoned(job: Any, connection: Any, kind: type[BaseException], value: BaseException,
                     traceback: Any) -> None:
    """RQ failure callback of every job. Only an abandoned job — its worker died, and registry
    maintenance found it later — comes here without an outcome: any other failure ran the
    job's own code, which recorded one."""
    if kind is AbandonedJobError:
        _record_lost(job, "worker_lost")


class AppContextMixin:
    """Wraps RQ's job execution and registry maintenance in the Flask app context."""

    def __init__(self, *args: Any, app: Flask, **kwargs: Any) -> None:
        self.app = app
        super().__init__(*args, **kwargs)

    def execute_job(self, job: Any, queue: Any) -> Any:
        # The worker's own lines about the job (its horse's death, say) carry the request id
        # of the webhook that enqueued it.
        with logs.bound(job.meta):
            return super().execute_job(job, queue)

    def perform_job(self, job: Any, queue: Any, execution: Any) -> bool:
        attempt = (job.number_of_retries or 0) + 1
        try:
            with self.app.app_context(), tracing.job_span(job.meta.get("kind", "job"), job.id,
                                                          attempt, job.meta):
                if self.is_horse:
                    # A forked horse must not share the parent's pooled connections, and writes
                    # its metrics where its worker's horses do (one file, not one per job).
                    db.engine.dispose(close=False)
                    metrics.as_work_horse()
                return super().perform_job(job, queue, execution)
        finally:
            if self.is_horse:
                # The horse ends with os._exit: its spans leave now or never.
                tracing.flush()

    def clean_registries(self) -> None:
        # Abandoned jobs found here get their outcome from `record_abandoned`.
        with self.app.app_context():
            super().clean_registries()

    def handle_work_horse_killed(self, job: Any, retpid: Any, ret_val: Any,
                                 rusage: Any) -> None:
        super().handle_work_horse_killed(job, retpid, ret_val, rusage)
        with self.app.app_context():
            _record_lost(job, "worker_killed")


class AppWorker(AppContextMixin, Worker):
    """Forks a work horse per job (production)."""


class AppSimpleWorker(AppContextMixin, SimpleWorker):
    """Runs jobs in the worker process itself, no fork (`worker --no-fork`, tests)."""


def run_worker(app: Flask, *, burst: bool, fork: bool = True) -> bool:
    """Work the `memory` queue; the scheduler it runs turns delayed retries back into jobs."""
    # Done once here, so each forked horse starts with the SDK's lazy parts loaded and an
    # extraction's statements compiled.
    llm.warm_up()
    try:
        runner.warm_up()
    except SQLAlchemyError as exc:
        # Only slower jobs: the first of each horse compiles its statements itself.
        log.warning("event=worker.warm_up_failed error=%s", type(exc).__name__)
    connection = redis_connection.client(app.config["REDIS_URL"])
    worker_class = AppWorker if fork else AppSimpleWorker
    wait, longest = REDIS_WAIT_S
    try:
        while True:
            try:
                worker = worker_class([Queue(QUEUE_NAME, connection=connection)],
                                      connection=connection, app=app)
                return worker.work(burst=burst, with_scheduler=True)
            except (redis.ConnectionError, redis.TimeoutError) as exc:
                # RQ waits out a Redis that drops while it waits for jobs, not one that is
                # gone when it registers or reports: a fresh worker once Redis answers again.
                log.warning("event=worker.redis_unavailable error=%s retry_in_s=%.0f",
                            type(exc).__name__, wait)
                time.sleep(wait)
                wait = min(wait * 2, longest)
    finally:
        connection.close()


@click.command("worker")
@click.option("--burst", is_flag=True, help="Run the jobs queued now, then exit.")
@click.option("--fork/--no-fork", default=True, show_default=True,
              help="Run each job in a work horse forked for it, or in the worker process "
                   "itself (several times faster per job; a crashing job takes the worker "
                   "down).")
@with_appcontext
def worker_command(burst: bool, fork: bool) -> None:
    """Run jobs of the `memory` queue (needs REDIS_URL; start as many as you like)."""
    app = current_app._get_current_object()
    if not app.config.get("REDIS_URL"):
        raise click.ClickException("REDIS_URL is not set: without Redis the jobs run inside "
                                   "the web process and no worker is needed")
    log_to_stderr()
    run_worker(app, burst=burst, fork=fork)
