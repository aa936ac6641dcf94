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
from datetime import timedelta
from typing import Any

import click
import redis
from flask import Flask, current_app
from flask.cli import with_appcontext
from rq import Queue, Retry, SimpleWorker, Worker, get_current_job
from rq.exceptions import AbandonedJobError
from rq.job import JobStatus
from rq.utils import now
from rq.worker import WorkerStatus
from sqlalchemy.exc import SQLAlchemyError

from app import logs, metrics, redis_connection, tracing
from app.cli import log_to_stderr
from app.extraction import llm, outcomes, runner
from app.extraction.queue import (
    LEGACY_QUEUE_NAME,
    JobResult,
    Payload,
    job_id_of,
    memory_queue,
    queue_name,
)
from app.system.installation import installation

log = logging.getLogger(__name__)

# job.meta: how often the job was put back as the same attempt (its session busy, or its failed
# outcome not written: `JobResult.deferred`).
DEFERRALS = "deferrals"
# RQ's maintenance — jobs of dead workers, jobs a dying worker popped, a scheduler that died
# with a Redis outage or failover — every 30 s rather than RQ's 10 min (a lock per queue makes
# it one worker's work).
MAINTENANCE_INTERVAL_S = 30
# How much later a job of another installation sharing our namespace is offered again.
GIVE_BACK_DELAY_S = 10
# The pause before the worker tries Redis again, doubling up to the longest.
REDIS_WAIT_S = (1.0, 30.0)


def run_current(run: Callable[[Payload, int, str], JobResult], payload: Payload) -> Retry | None:
    """Run one attempt of the RQ job being performed; a wish to retry becomes RQ's Retry."""
    job = get_current_job()
    # RQ counts every run again as a retry; those put back for a busy session are not attempts.
    runs = (job.number_of_retries or 0) + 1
    attempt = runs - job.meta.get(DEFERRALS, 0)
    result = run(payload, attempt, job_id_of(job))
    if result.retry_in is None:
        return None
    if result.deferred:
        job.meta[DEFERRALS] = job.meta.get(DEFERRALS, 0) + 1
        job.save_meta()
    # The job owns the policy (how many attempts, how long between them); RQ only carries out
    # this one delay, so `max` just has to stay above the retries RQ has counted so far.
    return Retry(max=runs, interval=result.retry_in)


def _record_lost(job: Any, reason: str) -> None:
    """A failed outcome for a job that could not write one itself, and its session's lock freed
    if it died holding it (needs the app context)."""
    kind, payload = job.meta.get("kind"), job.args[0] if job.args else None
    if kind is None or not isinstance(payload, dict):
        return
    if payload.get("session_id") is not None:
        memory_queue().release_dead_holder(payload["session_id"], job_id_of(job))
    ran_for_s = (now() - job.started_at).total_seconds() if job.started_at else 0.0
    attempts = (job.number_of_retries or 0) + 1 - job.meta.get(DEFERRALS, 0)
    outcomes.record_lost(kind, job_id_of(job), payload, attempts=attempts,
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
        kwargs.setdefault("maintenance_interval", MAINTENANCE_INTERVAL_S)
        super().__init__(*args, **kwargs)

    def handle_job_failure(self, job: Any, queue: Any, started_job_registry: Any = None,
                           exc_string: str = "", execution: Any = None) -> None:
        """A job that never started — popped into RQ's intermediate queue by a worker that
        died before running it, and found there by maintenance — goes back to its queue to be
        run: it was accepted (202) and never ran, so it is not a failure."""
        if execution is None and job.get_status() == JobStatus.QUEUED:
            log.warning("event=job.requeued job=%s reason=popped_by_a_dead_worker", job.id)
            queue.enqueue_job(job)
            return
        super().handle_job_failure(job, queue, started_job_registry, exc_string, execution)

    def request_stop(self, signum: Any, frame: Any) -> None:
        """SIGTERM/SIGINT. An idle worker is in a blocking dequeue that RQ leaves by raising
        from the signal handler, mid-read: under Sentinel redis-py then keeps the connection
        (it does not disconnect on errors there), so the BLMOVE stays open on the server and
        pops the next job for a worker that is gone, and RQ's last pipeline reads the BLMOVE's
        answer ("Wrong number of response items"). Closing the connections first ends the
        dequeue on the server; the worker's last writes open new ones."""
        if self.get_state() != WorkerStatus.BUSY:
            # The command channel first (RQ's own teardown step, done once), so its thread is
            # not left reading a connection closed under it.
            self.unsubscribe()
            self.pubsub_thread = None
            self.connection.connection_pool.disconnect()
        super().request_stop(signum, frame)

    def execute_job(self, job: Any, queue: Any) -> Any:
        with self.app.app_context():
            owner = job.meta.get("installation")
            here = installation()
            if owner is not None and owner != here.id:
                _give_back(job, queue, here.id)
                return None
        # The worker's own lines about the job (its horse's death, say) carry the request id
        # of the webhook that enqueued it.
        with logs.bound(job.meta):
            return super().execute_job(job, queue)

    def perform_job(self, job: Any, queue: Any, execution: Any) -> bool:
        attempt = (job.number_of_retries or 0) + 1 - job.meta.get(DEFERRALS, 0)
        try:
            with self.app.app_context(), tracing.job_span(job.meta.get("kind", "job"),
                                                          job_id_of(job), attempt, job.meta):
                if self.is_horse:
                    # A horse writes its metrics where its worker's horses do (one file, not
                    # one per job). Its engines started empty at the fork (app.database.pools).
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


def _give_back(job: Any, queue: Queue, own_id: str) -> None:
    """Another installation's job, found in our queue (two installations configured with one
    MEMORY_REDIS_NAMESPACE): never run here, back to the queue of its namespace, for its own
    workers."""
    owner_queue = Queue(queue_name(job.meta.get("namespace") or own_id),
                        connection=queue.connection)
    log.warning("event=job.foreign job=%s installation=%s own_installation=%s queue=%s",
                job.id, job.meta.get("installation"), own_id, owner_queue.name)
    with queue.connection.pipeline() as pipe:
        pipe.lrem(queue.intermediate_queue_key, 1, job.id)
        if owner_queue.name == queue.name:
            # One namespace, two installations: its owner takes it from here, and this worker
            # does not take it straight back.
            owner_queue.schedule_job(job, now() + timedelta(seconds=GIVE_BACK_DELAY_S),
                                     pipeline=pipe)
        else:
            owner_queue.enqueue_job(job, pipeline=pipe)
        pipe.execute()


def adopt_legacy_jobs(queue: Queue) -> int:
    """Jobs queued before namespaces (the queue `memory` and its delayed retries) move into this
    installation's queue, to run now: an upgrade loses none. How many moved."""
    legacy = Queue(LEGACY_QUEUE_NAME, connection=queue.connection)
    moved = 0
    for job_id in [*legacy.job_ids, *legacy.scheduled_job_registry.get_job_ids()]:
        job = legacy.fetch_job(job_id)
        legacy.remove(job_id)
        legacy.scheduled_job_registry.remove(job_id)
        if job is not None:
            queue.enqueue_job(job)
            moved += 1
    if moved:
        log.info("event=worker.legacy_jobs_adopted count=%d queue=%s", moved, queue.name)
    return moved


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
    name = queue_name(installation().namespace)
    try:
        while True:
            try:
                queue = Queue(name, connection=connection)
                adopt_legacy_jobs(queue)
                worker = worker_class([queue], connection=connection, app=app)
                return worker.work(burst=burst, with_scheduler=True)
            except (redis.ConnectionError, redis.TimeoutError) as exc:
                if burst:
                    raise click.ClickException(
                        f"Redis stopped answering ({type(exc).__name__}); a --burst worker "
                        "does not wait for it") from None
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
