"""A job never works blind (SPEC §11): the model is asked only with the user's comparison and
dismissed sets read from the database, and no connection opened before a fork is used after it.
Production shape: a real forking `flask --app wsgi worker`, its database connections killed
under it as a server restart or a proxy's idle timeout would."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import threading

import sqlalchemy as sa
from rq.job import JobStatus

from app.database.engines import hot_engines
from app.extensions import db
from app.memory.models import MemoryItem
from tests.completions import USER_ID, capture_on, event, outcomes, rq_job
from tests.conftest import TEST_DATABASE_URL, assert_ok
from tests.workers import (
    missing_outcomes_report,
    registered_workers,
    wait_until,
    worker_processes,
)

KNOWN = "仓库统一用 pnpm 管理依赖"
UNKNOWN_THREAD = 1094  # MariaDB: KILL of a connection that has ended already
DISMISSED = "周报发到邮件列表"


def kill_connections_to_the_test_database() -> int:
    """KILL every other connection to the test database, as a restart of MariaDB (or HAProxy's
    idle timeout) does to the sockets pooled in a running worker. How many were killed."""
    engine = sa.create_engine(TEST_DATABASE_URL)
    try:
        with engine.connect() as conn:
            ids = conn.execute(sa.text(
                "SELECT ID FROM information_schema.PROCESSLIST WHERE DB = DATABASE() "
                "AND ID <> CONNECTION_ID()")).scalars().all()
            killed = 0
            for connection_id in ids:
                try:
                    conn.execute(sa.text(f"KILL CONNECTION {int(connection_id)}"))
                    killed += 1
                except sa.exc.OperationalError as exc:
                    if exc.orig.args[0] != UNKNOWN_THREAD:
                        raise  # anything but "it ended meanwhile"
        return killed
    finally:
        engine.dispose()


def test_a_forked_job_sees_the_users_memories_after_its_workers_connections_died(
        app, llm, webhook, memories, tmp_path):
    capture_on(app)
    memories.add(USER_ID, KNOWN, scope="PROJECT", project_key="mao", source="AUTO")
    memories.add(USER_ID, DISMISSED, source="AUTO", status="DISMISSED")
    llm.reply_items([])
    llm.reply_items([])
    with worker_processes(1, tmp_path):
        wait_until(lambda: registered_workers() == 1, 60, "a registered worker")
        assert_ok(webhook(event()), 202)
        wait_until(lambda: len(outcomes(app)) == 1, 60, "the first outcome")
        assert kill_connections_to_the_test_database() > 0
        with app.app_context():  # this process's pools held killed sockets too
            db.engine.dispose()
            hot_engines().dispose()
        assert_ok(webhook(event()), 202)
        wait_until(lambda: len(outcomes(app)) == 2, 60, "the second outcome")

    second = outcomes(app)[1]
    assert (second["status"], second["reason"]) == ("succeeded", "nothing_to_remember")
    prompt = llm.requests[1].prompt
    assert KNOWN in prompt, "the model was asked without the user's memories"
    assert DISMISSED in prompt, "the model was asked without the dismissed set"


def test_no_pooled_database_connection_crosses_a_fork(app):
    """The invariant behind the test above, for every engine of the app: a forked child starts
    with empty pools, and the parent's connections stay usable by the parent."""
    with app.app_context():
        with db.engine.connect() as conn:
            conn.execute(sa.text("SELECT 1"))
        for engine in (hot_engines().reads, hot_engines().writes):
            with engine.connect() as conn:
                conn.execute(sa.text("SELECT 1"))
        pools = [db.engine.pool, *hot_engines().pools()]
        assert all(pool.checkedin() >= 1 for pool in pools)
        read_end, write_end = os.pipe()
        child = os.fork()
        if child == 0:  # pragma: no cover - the child reports through the pipe
            counts = [pool.checkedin() for pool in
                      [db.engine.pool, *hot_engines().pools()]]
            os.write(write_end, json.dumps(counts).encode())
            os._exit(0)
        os.close(write_end)
        with os.fdopen(read_end) as reader:
            in_child = json.loads(reader.read())
        os.waitpid(child, 0)
        assert in_child == [0] * len(pools)
        assert all(pool.checkedin() >= 1 for pool in [db.engine.pool, *hot_engines().pools()])
        with hot_engines().reads.connect() as conn:
            assert conn.execute(sa.text("SELECT 1")).scalar() == 1


def test_a_job_popped_by_a_worker_that_died_before_running_it_is_run(
        app, llm, webhook, run_jobs):
    """SPEC §11 "Workers": RQ moves a popped job into its intermediate queue; a worker killed
    right then never starts it. Maintenance finds it there (RQ's own bookkeeping: first seen,
    then more than a minute later) and it runs — it was accepted with a 202."""
    from datetime import timedelta

    from rq.utils import now

    from jobs.worker import AppSimpleWorker
    from tests.completions import rq_queue

    capture_on(app)
    llm.reply_items([])
    assert_ok(webhook(event()), 202)
    queue = rq_queue(app)
    (job_id,) = queue.job_ids
    # What the dying worker's dequeue did, then never got further.
    queue.connection.lmove(queue.key, queue.intermediate_queue_key)
    assert queue.job_ids == []
    intermediate = queue.intermediate_queue
    intermediate.set_first_seen(job_id)
    queue.connection.set(intermediate.get_first_seen_key(job_id),
                         (now() - timedelta(minutes=2)).timestamp())

    worker = AppSimpleWorker([queue], connection=queue.connection, app=app)
    worker.clean_registries()
    assert queue.job_ids == [job_id]
    run_jobs()
    (outcome,) = outcomes(app)
    assert (outcome["status"], outcome["attempts"]) == ("succeeded", 1)


def test_every_accepted_completion_is_learnt_with_its_memories_across_dropped_connections(
        app, llm, webhook, memories, tmp_path):
    """The fault run of SPEC §11 in small: two forking workers, deliveries in waves, every
    database connection killed between waves. Each 202 gets exactly one outcome, succeeded, and
    every prompt the model got holds the user's memories."""
    waves, per_wave = 4, 6
    capture_on(app)
    memories.add(USER_ID, KNOWN, scope="PROJECT", project_key="mao", source="AUTO")
    for _ in range(waves * per_wave):
        llm.reply_items([])
    accepted = 0
    with worker_processes(2, tmp_path):
        wait_until(lambda: registered_workers() == 2, 60, "two registered workers")
        for wave in range(waves):
            for n in range(per_wave):
                body = event(sessionId=1000 + wave * per_wave + n)
                accepted += assert_ok(webhook(body), 202)["enqueued"]
            expected = accepted
            wait_until(lambda: len(outcomes(app)) == expected, 120,  # noqa: B023 (awaited here)
                       "this wave's outcomes")
            kill_connections_to_the_test_database()
            with app.app_context():
                db.engine.dispose()
                hot_engines().dispose()

    done = outcomes(app)
    assert accepted == waves * per_wave
    assert sorted(o["sessionId"] for o in done) == list(range(1000, 1000 + accepted))
    assert {(o["status"], o["reason"]) for o in done} == {("succeeded", "nothing_to_remember")}
    assert len(llm.requests) == accepted
    assert all(KNOWN in request.prompt for request in llm.requests), "a blind model call"


class _Gate:
    """A TCP forwarder to the test database that can stop listening — as a database host (or
    the proxy in front of it) that refuses connections: a new connection fails to connect
    (MySQL client error 2003), not on a connection already open."""

    def __init__(self) -> None:
        self.upstream = sa.make_url(TEST_DATABASE_URL)
        self.port = 0
        self.listener: socket.socket | None = None
        self.open()

    def url(self) -> str:
        return self.upstream.set(host="127.0.0.1", port=self.port).render_as_string(
            hide_password=False)

    def open(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self.port = listener.getsockname()[1]
        self.listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def refuse(self) -> None:
        assert self.listener is not None
        self.close()

    def close(self) -> None:
        if self.listener is not None:
            self.listener.shutdown(socket.SHUT_RDWR)
            self.listener.close()
            self.listener = None

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # refused from now on
            server = socket.create_connection((self.upstream.host or "127.0.0.1",
                                               self.upstream.port or 3306))
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)
                end.close()


def _deliver_while_the_database_refuses(app, llm, webhook, tmp_path, event_id: str) -> dict:
    """One delivery to a forking worker whose database stops taking connections once the model
    has been asked (the first scripted reply must take a moment), and takes them again after
    that attempt ended; the delivery's one outcome."""
    gate = _Gate()
    with (contextlib.closing(gate),
          worker_processes(1, tmp_path, DATABASE_URL=gate.url(), MEMORY_RETRY_DELAYS_S="1")):
        wait_until(lambda: registered_workers() == 1, 60, "a registered worker")
        assert_ok(webhook(event(eventId=event_id)), 202)
        llm.wait_for_requests(1, 30)  # the job has read its inputs; the model thinks
        gate.refuse()
        job = rq_job(app, "extract-" + hashlib.sha1(event_id.encode()).hexdigest())
        wait_until(lambda: job.get_status() != JobStatus.STARTED, 30,
                   "the attempt to end while the database refuses connections")
        gate.open()
        wait_until(lambda: len(outcomes(app)) == 1, 90, "the job's outcome",
                   explain=lambda: missing_outcomes_report(app, [event_id], tmp_path))
    (outcome,) = outcomes(app)
    return outcome


def test_a_job_that_cannot_connect_to_write_its_answer_is_retried_not_lost(
        app, llm, webhook, tmp_path):
    """The database stops taking connections while the model thinks (a Galera writer killed,
    before HAProxy has marked it down): the forked job's first write has to connect, and
    cannot. The attempt is a transient failure, retried — not a failure whose outcome cannot
    be written either, which left the accepted delivery with no outcome at all."""
    capture_on(app)
    llm.reply_items([{"type": "user", "content": KNOWN}], delay=2)
    llm.reply_items([{"type": "user", "content": KNOWN}])
    outcome = _deliver_while_the_database_refuses(app, llm, webhook, tmp_path, "evt-unreachable")
    assert (outcome["status"], outcome["attempts"], outcome["inserted"]) == \
        ("succeeded", 2, 1), outcome
    with app.app_context():
        assert db.session.scalars(sa.select(MemoryItem.content)).all() == [KNOWN]
        db.session.remove()


def test_a_failed_job_whose_outcome_cannot_be_written_runs_again_until_it_can(
        app, llm, webhook, tmp_path):
    """The model refuses the request (a failure no retry mends) while the database refuses
    connections: the failed outcome cannot be written. The job is put back as the same attempt
    until the database takes it — not left in RQ's failed registry with no outcome."""
    capture_on(app)
    llm.reply(status=400, delay=2)
    llm.reply(status=400)
    outcome = _deliver_while_the_database_refuses(app, llm, webhook, tmp_path,
                                                  "evt-refused-unwritten")
    assert (outcome["status"], outcome["reason"], outcome["attempts"]) == \
        ("failed", "llm_rejected", 1), outcome
    assert len(llm.requests) == 2
