"""The `memory` job queue, as transport: RQ on Redis when REDIS_URL is set, one in-process
thread otherwise.

On Redis every key and queue of an installation lives under its namespace
(`app.system.installation`): the RQ queue `memory:<namespace>`, RQ job ids
`<namespace>-<job id>`, the session locks `memory:<namespace>:session-lock:<id>`. Each job
carries its installation's id (`meta`); a worker refuses another installation's job and gives
it back to its owner's queue (`jobs.worker`).

It carries a job of a kind with its payload (plain ids and text, never ORM objects) and knows
nothing of what jobs do: the kinds are defined in `jobs/` and handed to the app by
`jobs.init_app` (`job_kinds()`), so nothing in `app/` names a job by string. RQ enqueues a kind's
entry point by its dotted path and a worker runs it; the embedded thread calls the kind's `run`
directly. The queue also owns the per-session lock, because what makes two jobs of a session
overlap is how jobs are run: across RQ workers only a Redis lock can stop it, while the embedded
thread runs one job at a time anyway.
"""

from __future__ import annotations

import contextvars
import logging
import math
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import rq
from flask import Flask, current_app
from redis.exceptions import LockError

from app import redis_connection, tracing
from app.system import installation as installations

log = logging.getLogger(__name__)

# The queue of releases before namespaces: a worker moves what is left in it into its own.
LEGACY_QUEUE_NAME = "memory"
SESSION_LOCK = "session-lock"
# How long Redis keeps a finished job (for `rq info` and the failure registry).
RESULT_TTL_S = 24 * 3600
FAILURE_TTL_S = 7 * 24 * 3600

Payload = dict[str, Any]
# Deletes a session lock only while the given job holds it (KEYS[1] the lock, ARGV[1] the job).
_RELEASE_HELD_BY = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""
# Payload fields RQ's description of a job shows (its log line): ids, never text.
_DESCRIBED = (("user", "user_id"), ("session", "session_id"), ("group", "scope"))


# How long a job waits for its session's lock before it is put back (SPEC §11: a busy session
# never holds a worker), and how much later it is run again.
SESSION_LOCK_WAIT_S = 1
SESSION_BUSY_DELAY_S = 2


@dataclass(frozen=True)
class JobResult:
    """What a job tells the queue: done, or run me again in `retry_in` seconds — as its next
    attempt, or (`deferred`) as the same attempt, put back — its session was busy, or the
    database could not take its failed outcome."""

    retry_in: int | None = None
    deferred: bool = False


@dataclass(frozen=True)
class JobKind:
    """A kind of job (defined in `jobs/`)."""

    name: str  # the outcome's `kind`
    entry_point: Callable[[Payload], Any]  # what an RQ worker runs
    run: Callable[[Payload, int, str], JobResult]  # one attempt: (payload, attempt, job id)


@dataclass(frozen=True)
class JobKinds:
    """The kinds the app enqueues, and what RQ calls when a worker died under a job."""

    extraction: JobKind
    consolidation: JobKind
    on_failure: Callable[..., Any]


def job_kinds() -> JobKinds:
    kinds: JobKinds = current_app.extensions["memory_job_kinds"]
    return kinds


class SessionBusy(Exception):
    """Another job of the same session held the session lock longer than we may wait."""

    reason = "session_busy"


@dataclass(frozen=True)
class Timing:
    """Time budgets, all derived from the LLM timeout so they stay consistent.

    A job holding the session lock does one LLM call plus database work (`work_s`). A job that
    finds the lock taken waits a moment (`lock_wait_s`), then is put back for later instead of
    holding its worker; the RQ job timeout covers the wait and the own work; the lock outlives
    the job timeout and RQ's own kill margin, so a live holder never loses it and a dead one's
    lock expires (or is freed when its death is recorded).
    """

    work_s: int
    lock_wait_s: int = SESSION_LOCK_WAIT_S

    @classmethod
    def for_app(cls, app: Flask) -> Timing:
        return cls(work_s=math.ceil(float(app.config["MEMORY_LLM_TIMEOUT_S"])) + 30)

    @property
    def job_timeout_s(self) -> int:
        return self.lock_wait_s + self.work_s + 30

    @property
    def lock_timeout_s(self) -> int:
        # RQ kills a horse 60 s after its job timeout.
        return self.job_timeout_s + 90


def queue_name(namespace: str) -> str:
    return f"{LEGACY_QUEUE_NAME}:{namespace}"


def rq_job_id(namespace: str, job_id: str) -> str:
    """The RQ id of one of our jobs: the namespace keeps RQ's `rq:job:<id>` keys of two
    installations apart, even for one event delivered to both."""
    return f"{namespace}-{job_id}"


def job_id_of(job: rq.job.Job) -> str:
    """Our id of an RQ job (the outcome's, the session lock's holder)."""
    return str(job.meta.get("job_id", job.id))


def session_lock_key(namespace: str, session_id: int) -> str:
    return f"{LEGACY_QUEUE_NAME}:{namespace}:{SESSION_LOCK}:{session_id}"


class RedisJobQueue:
    """RQ queue `memory:<namespace>`; jobs run in `flask --app wsgi worker` processes."""

    def __init__(self, app: Flask) -> None:
        self.url = app.config["REDIS_URL"]
        self.timing = Timing.for_app(app)
        # Short timeouts: a webhook must answer 503 quickly when Redis is down.
        self.redis = redis_connection.client(self.url, socket_connect_timeout=2,
                                             socket_timeout=5)
        # With Sentinel an enqueued job must reach a replica before the delivery commits.
        self._confirming = (redis_connection.Confirming(self.url, socket_connect_timeout=2,
                                                        socket_timeout=5)
                            if redis_connection.is_sentinel(self.url) else None)
        self._confirming_queues = threading.local()
        self.installation = app.extensions[installations.EXTENSION]
        self._queue: rq.Queue | None = None
        self._release_held_by = self.redis.register_script(_RELEASE_HELD_BY)

    def rq_queue(self) -> rq.Queue:
        """This installation's queue (its namespace is read from the database once). Kept: a
        Queue asks the server its version once, and every webhook enqueues."""
        if self._queue is None:
            self._queue = rq.Queue(queue_name(self.installation.namespace),
                                   connection=self.redis)
        return self._queue

    def enqueue(self, kind: JobKind, payload: Payload, job_id: str) -> None:
        """One round trip (MULTI/EXEC): the job and its place in the queue, or neither. With
        Sentinel, then a WAIT on the same connection, which returns once a replica holds both
        (`redis_connection.Confirming`).

        Exactly-once is not asked of Redis: the webhook's event row (unique per eventId, in the
        transaction that commits only after this) lets one delivery of an event through, and a
        job's effects commit with its outcome (unique per job id), so a job run twice changes
        nothing the second time. RQ's own `unique=True` costs a second round trip and a script.
        """
        here = self.installation
        job = self.rq_queue().create_job(
            kind.entry_point, args=(payload,), job_id=rq_job_id(here.namespace, job_id),
            timeout=self.timing.job_timeout_s, result_ttl=RESULT_TTL_S,
            failure_ttl=FAILURE_TTL_S,
            meta={"kind": kind.name, "job_id": job_id, "installation": here.id,
                  "namespace": here.namespace, **tracing.job_meta()},
            on_failure=rq.Callback(job_kinds().on_failure),
            # What RQ logs for the job: ids only, never the conversation in the payload.
            description=" ".join([kind.name, *(f"{name}={payload[key]}" for name, key in
                                               _DESCRIBED if key in payload)]))
        queue = self.rq_queue() if self._confirming is None else self._confirming_queue()
        pipe = queue.connection.pipeline()
        queue.enqueue_job(job, pipeline=pipe)
        pipe.execute()
        if self._confirming is not None:
            self._confirming.wait_for_replica(queue.connection)

    def _confirming_queue(self) -> rq.Queue:
        """This thread's queue on its one-connection client (`Confirming`)."""
        found = getattr(self._confirming_queues, "queue", None)
        if found is None:
            assert self._confirming is not None
            found = rq.Queue(self.rq_queue().name, connection=self._confirming.client())
            self._confirming_queues.queue = found
        return found

    @contextmanager
    def session_lock(self, session_id: int, holder: str) -> Iterator[None]:
        """The session's lock, held by the job `holder` (its id is the lock's token, so the
        worker that saw the job die can free it: `release_dead_holder`)."""
        lock = self.redis.lock(session_lock_key(self.installation.namespace, session_id),
                               timeout=self.timing.lock_timeout_s,
                               blocking_timeout=self.timing.lock_wait_s)
        if not lock.acquire(token=holder):
            raise SessionBusy(f"session {session_id} is locked by another job")
        try:
            yield
        finally:
            try:
                lock.release()
            except LockError:
                log.warning("event=session_lock.expired session=%s", session_id)

    def release_dead_holder(self, session_id: int, holder: str) -> bool:
        """Free the session's lock if the job `holder`, which died, still holds it (a killed
        work horse cannot): the session's next job need not wait out the lock's timeout."""
        return bool(self._release_held_by(
            keys=[session_lock_key(self.installation.namespace, session_id)], args=[holder]))


class InProcessJobQueue:
    """The embedded setup: one background thread runs jobs in order, each in an app context.

    A single thread means two jobs never overlap at all, so no session lock is needed. Retries
    wait on a timer and go back to the same thread; they are lost if the process exits first.
    """

    def __init__(self, app: Flask) -> None:
        self.app = app
        self._idle = threading.Condition()
        self._pending = 0
        self._executor: ThreadPoolExecutor | None = None

    def enqueue(self, kind: JobKind, payload: Payload, job_id: str) -> None:
        with self._idle:
            self._pending += 1
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=1,
                                                    thread_name_prefix="memory-jobs")
        self._submit(kind, payload, job_id, 1, contextvars.copy_context())

    @contextmanager
    def session_lock(self, session_id: int, holder: str) -> Iterator[None]:
        yield

    def release_dead_holder(self, session_id: int, holder: str) -> bool:
        return False

    def wait_idle(self, timeout_s: float) -> bool:
        """Wait until every job (retries included) has finished; False on timeout."""
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout=timeout_s)

    def _submit(self, kind: JobKind, payload: Payload, job_id: str, attempt: int,
                context: contextvars.Context) -> None:
        assert self._executor is not None
        # Each attempt runs in a copy of the enqueueing request's context: its lines carry the
        # request's id, its spans join the request's trace (`app.tracing`).
        self._executor.submit(context.copy().run, self._run, kind, payload, job_id, attempt,
                              context)

    def _run(self, kind: JobKind, payload: Payload, job_id: str, attempt: int,
             context: contextvars.Context) -> None:
        result = JobResult()
        try:
            with self.app.app_context(), tracing.job_span(kind.name, job_id, attempt):
                result = kind.run(payload, attempt, job_id)
        except Exception:
            # The job has recorded its failed outcome; the thread must live on for the next.
            log.exception("event=job.crashed kind=%s job=%s attempt=%d", kind.name, job_id,
                          attempt)
        if result.retry_in is not None:
            timer = threading.Timer(result.retry_in, self._submit,
                                    (kind, payload, job_id, attempt + 1, context))
            timer.daemon = True
            timer.start()
            return
        with self._idle:
            self._pending -= 1
            self._idle.notify_all()


def init_app(app: Flask) -> None:
    app.extensions["memory_queue"] = (RedisJobQueue(app) if app.config.get("REDIS_URL")
                                      else InProcessJobQueue(app))


def memory_queue() -> RedisJobQueue | InProcessJobQueue:
    queue: RedisJobQueue | InProcessJobQueue = current_app.extensions["memory_queue"]
    return queue
