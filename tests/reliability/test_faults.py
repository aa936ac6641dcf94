"""Faults: Redis going away and coming back, MariaDB connections killed under the app, and a
worker killed while the model is still answering.

Redis is a server of this test's own, started on a free port and stopped and restarted at will
(never the shared one). Killed connections are only those of this run's test database.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable

import pytest
import redis
import sqlalchemy as sa
from flask import Flask
from flask.testing import FlaskClient
from rq import Queue
from werkzeug.test import TestResponse

from app.extensions import db
from app.extraction.models import WebhookEvent
from app.memory.context_cache import REDIS_BACKOFF_S
from app.sessions.models import PlatformSession
from tests.completions import capture_on, event, only_outcome, outcomes, queue_name
from tests.conftest import SERVICE_TOKEN, TEST_DATABASE_URL, TEST_REDIS_URL, Accounts, Memories
from tests.llm_server import ScriptedLlm
from tests.redis_server import RedisServer
from tests.reliability.conftest import deliver, envelope_error
from tests.workers import wait_until, work_horse_of, worker_processes

USER_ID = 7


# ---- Redis stopped and restarted ------------------------------------------------------------

def _recorded(app: Flask, event_id: str, session_id: int) -> tuple[int, int]:
    with app.app_context():
        events = db.session.scalar(sa.select(sa.func.count()).select_from(WebhookEvent)
                                   .where(WebhookEvent.event_id == event_id))
        sessions = db.session.scalar(sa.select(sa.func.count()).select_from(PlatformSession)
                                     .where(PlatformSession.id == session_id))
        db.session.remove()
        return events, sessions


def test_webhook_is_503_with_nothing_recorded_while_redis_is_down_and_fine_after(
        app, make_app, own_redis: RedisServer):
    """`app` empties the tables; the app under test talks to the test's own Redis."""
    service = make_app(REDIS_URL=own_redis.url)
    capture_on(service, USER_ID)
    client = service.test_client()
    queue = Queue(queue_name(service), connection=service.extensions["memory_queue"].redis)

    first = deliver(client, event(eventId="evt-before", sessionId=1, userId=USER_ID))
    assert first.get_json()["data"]["enqueued"] is True

    own_redis.stop()
    started = time.monotonic()
    down = deliver(client, event(eventId="evt-while-down", sessionId=2, userId=USER_ID))
    envelope_error(down, 503, 5001)
    assert time.monotonic() - started < 30, "a 503 must come quickly"
    assert _recorded(service, "evt-while-down", 2) == (0, 0), "recorded half-way"

    own_redis.start()
    after = deliver(client, event(eventId="evt-after", sessionId=3, userId=USER_ID))
    assert after.status_code == 202, after.text
    assert after.get_json()["data"]["enqueued"] is True
    assert _recorded(service, "evt-after", 3) == (1, 1)
    assert queue.count == 1, "the restarted Redis holds the new job"
    # The delivery refused while Redis was down can be sent again, and now goes through.
    retried = deliver(client, event(eventId="evt-while-down", sessionId=2, userId=USER_ID))
    assert retried.get_json()["data"]["enqueued"] is True


def test_while_redis_is_down_context_reads_come_from_the_database_and_changes_wait(
        app, make_app, own_redis: RedisServer, users, memories):
    """Issue 12: Redis down → the block is read from the database, still correct; a change is
    refused (503, nothing changed) rather than committed where no cache can hear of it; after
    the restart the first read is the database's truth."""
    service = make_app(REDIS_URL=own_redis.url)
    owner = users.user("owner")
    item_id = memories.add(owner, "改之前")
    client = service.test_client()
    token = {"Authorization": f"Bearer {Accounts(service).token('owner')}"}
    platform = {"Authorization": f"Bearer {SERVICE_TOKEN}"}

    def contents() -> list[str]:
        response = client.get(f"/api/v1/internal/memory/context?userId={owner}",
                              headers=platform)
        assert response.status_code == 200, response.text
        return [m["content"] for m in response.get_json()["data"]["memories"]]

    assert contents() == ["改之前"]  # cached now
    own_redis.stop()
    assert contents() == ["改之前"]
    refused = client.patch(f"/api/v1/memory/{item_id}", json={"content": "改之后"},
                           headers=token)
    envelope_error(refused, 503, 5001)
    assert memories.get(item_id)["content"] == "改之前"
    assert contents() == ["改之前"]
    own_redis.start()
    time.sleep(REDIS_BACKOFF_S)  # this process skips Redis for a moment after a failure
    assert contents() == ["改之前"]
    assert client.patch(f"/api/v1/memory/{item_id}", json={"content": "改之后"},
                        headers=token).status_code == 200
    assert contents() == ["改之后"]


# ---- MariaDB connections killed -------------------------------------------------------------

def kill_test_database_connections() -> int:
    """KILL every connection to this run's test database but our own; how many were killed."""
    database = sa.make_url(TEST_DATABASE_URL).database
    engine = sa.create_engine(TEST_DATABASE_URL, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as connection:
            ids = connection.execute(sa.text(
                "SELECT ID FROM information_schema.PROCESSLIST "
                "WHERE DB = :db AND ID <> CONNECTION_ID()"), {"db": database}).scalars().all()
            for connection_id in ids:
                # It may have ended on its own meanwhile.
                try:
                    connection.execute(sa.text(f"KILL {int(connection_id)}"))
                except sa.exc.OperationalError:
                    continue
            return len(ids)
    finally:
        engine.dispose()


Call = Callable[[str], TestResponse]


@pytest.fixture
def callers(app: Flask, client: FlaskClient, users: Accounts,
            memories: Memories) -> dict[str, tuple[Call, int]]:
    """One request of each kind people and the platform make, and the status it must get; each
    call is told which attempt it is (the webhook needs a new event id every time)."""
    owner = users.user("alice", user_id=USER_ID)
    users.user("root", admin=True)
    memories.add(owner, "用中文写报告")
    capture_on(app, USER_ID)
    token = {"Authorization": f"Bearer {users.token('alice')}"}
    admin = {"Authorization": f"Bearer {users.token('root')}"}
    service = {"Authorization": f"Bearer {SERVICE_TOKEN}"}
    return {
        "user API": (lambda _: client.get("/api/v1/memory", headers=token), 200),
        "admin API": (lambda _: client.get(f"/api/v1/admin/memory?userId={owner}",
                                           headers=admin), 200),
        "context read": (lambda _: client.get(
            f"/api/v1/internal/memory/context?userId={owner}", headers=service), 200),
        "webhook": (lambda attempt: deliver(client, event(eventId=f"evt-killed-{attempt}",
                                                          userId=USER_ID)), 202),
    }


@pytest.mark.parametrize("caller", ["user API", "admin API", "context read", "webhook"])
def test_the_next_request_after_killed_connections_succeeds(callers, caller):
    call, expected = callers[caller]
    # Twice, so every pool the route uses holds a connection to kill.
    for attempt in ("warm-1", "warm-2"):
        assert call(attempt).status_code == expected
    assert kill_test_database_connections() >= 1
    for attempt in ("after-kill-1", "after-kill-2"):
        response = call(attempt)
        assert response.status_code == expected, (caller, response.text)
    if caller == "context read":
        assert response.get_json()["data"]["memories"], "the read found alice's memory"


def _fill_pool(engine: sa.Engine, connections: int) -> None:
    """Leave `connections` idle connections in the pool, as several threads' requests would."""
    held = [engine.raw_connection() for _ in range(connections)]
    for connection in held:
        connection.close()


@pytest.mark.parametrize(("caller", "pool"), [("context read", "reads"),
                                              ("webhook", "writes")])
def test_the_next_request_after_a_restart_succeeds_whatever_the_pool_holds(
        app, callers, caller, pool):
    """Every idle connection of a hot path's pool died (a database restart): the first request that
    finds one still succeeds, not only once the pool has been drained."""
    call, expected = callers[caller]
    assert call("warm").status_code == expected
    _fill_pool(getattr(app.extensions["hot_engines"], pool), 4)
    assert kill_test_database_connections() >= 4
    for attempt in ("after-restart-1", "after-restart-2"):
        response = call(attempt)
        assert response.status_code == expected, (caller, response.text)


# ---- a worker killed while the model answers ------------------------------------------------

FACT = "被杀掉的任务想记住的事实"


def _count(app: Flask, content: str) -> int:
    from app.memory.models import MemoryItem

    with app.app_context():
        found = db.session.scalar(sa.select(sa.func.count()).select_from(MemoryItem)
                                  .where(MemoryItem.content == content))
        db.session.remove()
        return found


def _kill(worker: subprocess.Popen, what: str) -> None:
    horse = work_horse_of(worker.pid)
    assert horse is not None, "the job is not running in a work horse"
    if what == "worker and horse":
        os.kill(worker.pid, signal.SIGKILL)
    os.kill(horse, signal.SIGKILL)


@pytest.mark.parametrize("what", ["horse", "worker and horse"])
def test_a_job_killed_while_the_model_answers_is_failed_once_and_never_applied(
        app, client, llm: ScriptedLlm, tmp_path, what):
    capture_on(app, USER_ID)
    # Slow enough to kill the job while it waits for the answer.
    llm.reply_items([{"type": "user", "content": FACT}], delay=4)
    body = event(eventId="evt-killed-mid-llm", userId=USER_ID)
    assert deliver(client, body).get_json()["data"]["enqueued"] is True

    with worker_processes(1, tmp_path, burst=True) as (worker,):
        llm.wait_for_requests(1, timeout_s=60)
        _kill(worker, what)
        worker.wait(timeout=30)
    if what == "worker and horse":
        # Nobody is left to write the outcome: RQ's registry maintenance finds the job later
        # (run here as if its heartbeat had long expired).
        assert outcomes(app) == []
        with app.app_context():
            queue = app.extensions["memory_queue"].rq_queue()
            queue.started_job_registry.cleanup(timestamp=time.time() + 24 * 3600)
    # The answer the model was still writing reaches nobody.
    wait_until(lambda: llm.requests[0].ended < float("inf"), 30, "the model's answer")

    outcome = only_outcome(app)
    assert (outcome["status"], outcome["inserted"]) == ("failed", 0)
    assert outcome["reason"] == ("worker_killed" if what == "horse" else "worker_lost")
    assert _count(app, FACT) == 0, "a killed job wrote something"

    # The platform delivering the same completion again enqueues nothing…
    again = deliver(client, body).get_json()["data"]
    assert (again["enqueued"], again["reason"]) == (False, "duplicate_event")
    connection = redis.Redis.from_url(TEST_REDIS_URL)
    try:
        assert Queue(queue_name(app), connection=connection).count == 0
    finally:
        connection.close()
    # …and a fresh worker finds nothing to run twice.
    with worker_processes(1, tmp_path, burst=True) as (worker,):
        assert worker.wait(timeout=60) == 0
    assert len(llm.requests) == 1 and len(outcomes(app)) == 1
    assert _count(app, FACT) == 0
