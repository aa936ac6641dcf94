"""Real `flask --app wsgi worker` processes on the test database and Redis (started from a fork
server: `tests.forked_commands`), waits on what they do, and what became of the jobs a wait
found missing."""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import redis
import sqlalchemy as sa
from flask import Flask
from rq import Worker
from rq.exceptions import NoSuchJobError
from rq.job import Job

from tests import forked_commands
from tests.conftest import TEST_DATABASE_URL, TEST_REDIS_URL, WEBHOOK_SECRET

ROOT = Path(__file__).resolve().parent.parent


def worker_env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "DATABASE_URL": TEST_DATABASE_URL, "REDIS_URL": TEST_REDIS_URL,
           "MEMORY_WEBHOOK_SECRET": WEBHOOK_SECRET, "MEMORY_LLM_TIMEOUT_S": "5",
           "MEMORY_RETRY_DELAYS_S": "1", "PYTHONUNBUFFERED": "1"}
    env.update(extra)
    return env


@contextlib.contextmanager
def worker_processes(count: int, log_dir: Path, *, burst: bool = False, fork: bool = True,
                     **env: str) -> Iterator[list[forked_commands.ForkedCommand]]:
    """Start `count` workers (logs in log_dir); on exit stop them (SIGTERM, then SIGKILL)."""
    command = ["--app", "wsgi", "worker"]
    if burst:
        command.append("--burst")
    if not fork:
        command.append("--no-fork")
    started: list[forked_commands.ForkedCommand] = []
    try:
        for i in range(count):
            started.append(forked_commands.start(command, env=worker_env(**env), cwd=ROOT,
                                                 output=log_dir / f"worker-{i}.log"))
        yield started
    finally:
        for process in started:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in started:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@contextlib.contextmanager
def _registered() -> Iterator[list[Worker]]:
    """The workers registered on this test's Redis db (the tests' own), on a connection open
    while they are read."""
    connection = redis.Redis.from_url(TEST_REDIS_URL)
    try:
        yield Worker.all(connection=connection)
    finally:
        connection.close()


def registered_workers() -> int:
    with _registered() as workers:
        return len(workers)


def worker_states() -> list[str]:
    """The state of each registered worker ("started", "idle", "busy", …)."""
    with _registered() as workers:
        return [worker.get_state() for worker in workers]


def _explained(explain: Callable[[], str] | None) -> str:
    if explain is None:
        return ""
    try:
        return "\n" + explain()
    except Exception as exc:  # the timeout is the news; a broken report must not hide it
        return f"\n(no report: {exc!r})"


def wait_until(condition: Callable[[], object], timeout_s: float, what: str,
               explain: Callable[[], str] | None = None) -> None:
    """Poll `condition` until it holds; on timeout fail, saying what was awaited and, when
    given, what `explain` finds then (what is missing, and why)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out waiting for {what}{_explained(explain)}")
        time.sleep(0.05)


def wait_for_progress(count: Callable[[], int], target: int, stalled_s: float, what: str,
                      explain: Callable[[], str] | None = None) -> None:
    """Poll `count` until it reaches `target`, failing only once it has not grown for
    `stalled_s`: a backlog that drains slowly on a busy machine is waited out, one that stops
    draining fails (saying, when given, what `explain` finds then)."""
    done, progressed = count(), time.monotonic()
    while done < target:
        time.sleep(0.5)
        now_done = count()
        if now_done > done:
            done, progressed = now_done, time.monotonic()
        elif time.monotonic() - progressed >= stalled_s:
            raise AssertionError(f"timed out waiting for {what}: {done} of {target}, none new "
                                 f"for {stalled_s:.0f} s{_explained(explain)}")


def work_horse_of(worker_pid: int) -> int | None:
    """The child a worker forked for its current job: RQ puts it in its own process group."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid, parent, group = int(stat.parent.name), int(fields[1]), int(fields[2])
        if parent == worker_pid and group == pid:
            return pid
    return None


def _lines_naming(log_dir: Path, needles: tuple[str, ...], last: int) -> list[str]:
    """The last `last` lines of the logs in `log_dir` that name one of `needles`."""
    found = []
    for path in sorted(log_dir.glob("*.log")):
        for line in path.read_text(errors="replace").splitlines():
            if any(needle in line for needle in needles):
                found.append(f"{path.name}: {line}")
    return found[-last:]


def missing_outcomes_report(app: Flask, event_ids: list[str], log_dir: Path, *,
                            detailed: int = 15) -> str:
    """What became of the extraction jobs of accepted deliveries that have no outcome: for each
    (the first `detailed`), its event row, its RQ job's hash, where the job is (queue,
    intermediate queue, registries), its session's lock, and the worker log lines naming it;
    then the queue's and the workers' state and the tail of every log in `log_dir`."""
    from app.extensions import db
    from app.extraction.models import JobOutcome, WebhookEvent
    from app.extraction.queue import memory_queue, rq_job_id, session_lock_key
    from app.system.installation import installation

    with app.app_context():
        done = set(db.session.scalars(sa.select(JobOutcome.event_id).where(
            JobOutcome.event_id.is_not(None))))
        missing = [e for e in event_ids if e not in done]
        events = {row.event_id: (row.reason, row.session_id) for row in db.session.execute(
            sa.select(WebhookEvent.event_id, WebhookEvent.reason, WebhookEvent.session_id)
            .where(WebhookEvent.event_id.in_(missing[:detailed])))} if missing else {}
        db.session.remove()
        namespace = installation().namespace
        queue = memory_queue().rq_queue()
    connection = queue.connection
    registries = {"started": queue.started_job_registry,
                  "scheduled": queue.scheduled_job_registry,
                  "failed": queue.failed_job_registry, "finished": queue.finished_job_registry,
                  "deferred": queue.deferred_job_registry,
                  "canceled": queue.canceled_job_registry}
    lines = [f"{len(missing)} of {len(event_ids)} accepted deliveries have no outcome "
             f"({len(done)} outcomes with an event id); queue {queue.name}: "
             f"{queue.count} queued, {connection.llen(queue.intermediate_queue_key)} "
             "intermediate, " + ", ".join(f"{len(r)} {name}" for name, r in registries.items())]
    for event_id in missing[:detailed]:
        # The webhook's job id for an event (app.extraction.intake.CompletedTask.job_id).
        job_id = "extract-" + hashlib.sha1(event_id.encode("utf-8")).hexdigest()
        rq_id = rq_job_id(namespace, job_id)
        reason, session_id = events.get(event_id, (None, None))
        lines.append(f"- {event_id}: event row {reason or 'MISSING'}, job {rq_id}")
        try:
            job = Job.fetch(rq_id, connection=connection)
            lines.append(
                f"    hash: status={job.get_status(refresh=False)} origin={job.origin} "
                f"enqueued={job.enqueued_at} started={job.started_at} ended={job.ended_at} "
                f"worker={job.worker_name} retries={job.number_of_retries} "
                f"retries_left={job.retries_left} meta={job.meta}")
            result = job.latest_result()
            if result is not None:
                lines.append(f"    latest result: {result.type.name} "
                             f"{(result.exc_string or '').strip().splitlines()[-1:]}")
        except NoSuchJobError:
            lines.append("    hash: NONE (no rq:job key)")
        places = []
        if connection.lpos(queue.key, rq_id) is not None:
            places.append("queue")
        if connection.lpos(queue.intermediate_queue_key, rq_id) is not None:
            places.append("intermediate queue")
        for name, registry in registries.items():
            score = connection.zscore(registry.key, rq_id)
            if score is not None:
                places.append(f"{name} (score {score:.0f}, now {time.time():.0f})")
        # The started registry holds executions, `<job id>:<execution id>`.
        places += [f"started as {m.decode()}" for m in connection.zrange(
            queue.started_job_registry.key, 0, -1) if m.decode().startswith(f"{rq_id}:")]
        lines.append(f"    in: {', '.join(places) or 'NO QUEUE OR REGISTRY'}")
        if session_id is not None:
            key = session_lock_key(namespace, session_id)
            holder = connection.get(key)
            lines.append(f"    session {session_id} lock: "
                         f"{holder.decode() if holder else 'free'} (ttl {connection.ttl(key)})")
        lines += [f"    {line}" for line in _lines_naming(log_dir, (job_id, rq_id), 12)]
    for worker in Worker.all(connection=connection):
        lines.append(f"worker {worker.name}: state={worker.get_state()} "
                     f"job={worker.get_current_job_id()} heartbeat={worker.last_heartbeat}")
    for path in sorted(log_dir.glob("*.log")):
        tail = path.read_text(errors="replace").splitlines()[-25:]
        lines += [f"--- last lines of {path.name}:", *tail]
    return "\n".join(lines)
