"""Liveness: no request, job or failure leaves a transaction, a lock, a checked-out connection or
a session lock behind; a replayed or concurrent delivery answers `duplicate_event`; a conflict
between transactions is retried; a worker outlives a Redis outage.

(Every test of the suite is also checked after it ran: `assert_nothing_left_behind` in
`tests/conftest.py`.)
"""

from __future__ import annotations

import json
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
import redis
import sqlalchemy as sa
from pymysql.err import OperationalError as PyMySQLOperationalError
from rq import Worker

from app.database import batches, conflicts, engines, pools
from app.platform import client
from tests.completions import USER_ID, capture_on, event, outcomes
from tests.conftest import (
    SERVICE_TOKEN,
    TEST_DATABASE_URL,
    TEST_REDIS_URL,
    WEBHOOK_SECRET,
    open_transactions,
)
from tests.reliability.conftest import deliver
from tests.serving import gunicorn
from tests.workers import wait_until, worker_processes

WEB_ENV = {"REDIS_URL": TEST_REDIS_URL, "MEMORY_WEBHOOK_SECRET": WEBHOOK_SECRET,
           "MEMORY_SERVICE_TOKEN": SERVICE_TOKEN, "SECRET_KEY": "one-key-for-every-web-process",
           "MEMORY_LLM_TIMEOUT_S": "5"}
COPIES = 24
OUTAGE_S = 10


def _reason(response) -> str:
    assert response.status_code == 202, response.text
    return response.get_json()["data"]["reason"]


def test_a_replayed_delivery_leaves_no_transaction_open(app):
    capture_on(app)
    client = app.test_client()
    body = event(eventId="evt-replayed")
    assert _reason(deliver(client, body)) == "enqueued"
    assert _reason(deliver(client, body)) == "duplicate_event"
    # Looked at while the app's pools still hold their connections.
    assert open_transactions() == []


def test_a_replayed_delivery_does_not_block_the_users_next_write(app):
    capture_on(app)
    client = app.test_client()
    body = event(eventId="evt-replayed-then-write")
    deliver(client, body)
    deliver(client, body)
    started = time.monotonic()
    answer = client.patch("/api/v1/memory/settings", json={"autoCaptureEnabled": False},
                        headers={"Authorization": f"Bearer {SERVICE_TOKEN}",
                                 "X-User-Id": str(USER_ID)})
    assert answer.status_code == 200, answer.text
    assert time.monotonic() - started < 5


def test_concurrent_identical_deliveries_answer_duplicate_event(app):
    capture_on(app)
    body = event(eventId="evt-concurrent")
    clients = [app.test_client() for _ in range(8)]
    with ThreadPoolExecutor(8) as pool:
        reasons = list(pool.map(lambda c: _reason(deliver(c, body)), clients * 3))
    assert sorted(set(reasons)) == ["duplicate_event", "enqueued"]
    assert reasons.count("enqueued") == 1


def _conflict(number: int) -> sa.exc.OperationalError:
    return sa.exc.OperationalError("COMMIT", None, PyMySQLOperationalError(number, "conflict"))


@pytest.mark.parametrize("number", [conflicts.DEADLOCK, conflicts.LOCK_WAIT_TIMEOUT])
def test_a_conflict_is_run_again_at_most_twice(number):
    calls = []

    @conflicts.retry_conflicts
    def work(fail_times: int) -> str:
        calls.append(1)
        if len(calls) <= fail_times:
            raise _conflict(number)
        return "done"

    assert work(2) == "done" and len(calls) == 3
    calls.clear()
    with pytest.raises(sa.exc.OperationalError):
        work(3)
    assert len(calls) == 3


def test_another_database_error_is_not_run_again():
    calls = []

    @conflicts.retry_conflicts
    def work() -> None:
        calls.append(1)
        raise _conflict(1146)  # no such table

    with pytest.raises(sa.exc.OperationalError):
        work()
    assert len(calls) == 1


class FakeDriverConnection:
    """A DB-API connection as PyMySQL reports its last answer (`server_status`)."""

    def __init__(self, in_transaction: bool) -> None:
        from pymysql.constants.SERVER_STATUS import SERVER_STATUS_IN_TRANS

        self.server_status = SERVER_STATUS_IN_TRANS if in_transaction else 0
        self.rollbacks = 0

    def rollback(self) -> None:
        self.rollbacks += 1


class FakeRecord:
    def __init__(self, **info) -> None:
        self.info = dict(info)


def _reset(driver, record, *, reset_by_sqlalchemy: bool = False) -> int:
    pools.prove_idle(driver, record, sa.pool.PoolResetState(
        transaction_was_reset=reset_by_sqlalchemy, terminate_only=False, asyncio_safe=True))
    return driver.rollbacks


RESETS = {
    "committed, the server says idle": (False, {pools.ENDED: True}, False, 0),
    "begun and never ended": (False, {pools.ENDED: False}, False, 1),
    "a statement failed": (False, {pools.ENDED: True, pools.FAILED: True}, False, 1),
    "the server says a transaction is open": (True, {pools.ENDED: True}, False, 1),
    "rolled back by SQLAlchemy on close": (True, {pools.ENDED: False}, True, 0),
    "rolled back by SQLAlchemy, after a failure": (True, {pools.FAILED: True}, True, 1),
}


@pytest.mark.parametrize(("in_transaction", "info", "reset_by_sqlalchemy", "rollbacks"),
                         RESETS.values(), ids=RESETS.keys())
def test_a_connection_is_given_back_without_a_rollback_only_when_it_proves_it_idle(
        in_transaction, info, reset_by_sqlalchemy, rollbacks):
    driver = FakeDriverConnection(in_transaction)
    assert _reset(driver, FakeRecord(**info), reset_by_sqlalchemy=reset_by_sqlalchemy) == \
        rollbacks


def test_a_failed_batch_leaves_no_transaction_open(app):
    """A failed INSERT opens a transaction (and keeps its locks) though nothing succeeded."""
    with app.app_context():
        engine = engines.hot_engines().writes
        with engine.connect() as conn:
            with pytest.raises(sa.exc.DBAPIError):
                batches.batch(conn, batches.written(
                    sa.text("INSERT INTO no_such_table VALUES (1)"), {}))
        with engine.connect() as conn:  # the same pooled connection, given back and taken
            assert conn.exec_driver_sql("SELECT @@in_transaction").scalar() == 0
            conn.rollback()
        assert open_transactions() == []


def _create(base_url: str, content: str) -> int:
    request = urllib.request.Request(
        base_url + "/api/v1/memory", method="POST",
        data=json.dumps({"scope": "USER", "content": content}).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {SERVICE_TOKEN}",
                 "X-User-Id": str(USER_ID)})
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status


def test_a_replay_storm_across_two_web_processes_leaves_the_user_writable(app, llm, tmp_path):
    """Identical deliveries in parallel across two gunicorn processes; then the user's own
    writes on each process and the job, each answered promptly."""
    capture_on(app)
    llm.reply_items([])
    body = event(eventId="evt-storm")
    with (gunicorn(tmp_path, "web-a", **WEB_ENV) as web_a,
          gunicorn(tmp_path, "web-b", **WEB_ENV) as web_b):
        webs = (web_a.url, web_b.url)
        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(
                lambda n: client.deliver(webs[n % 2], WEBHOOK_SECRET, body), range(COPIES)))
        assert {answer.status for answer in answers} == {202}
        reasons = [json.loads(answer.body)["data"]["reason"] for answer in answers]
        assert reasons.count("enqueued") == 1
        assert reasons.count("duplicate_event") == COPIES - 1
        assert open_transactions() == []
        for n in range(6):  # every pooled connection of both processes in turn
            started = time.monotonic()
            assert _create(webs[n % 2], f"风暴之后第 {n} 条手写记忆") == 201
            assert time.monotonic() - started < 5
        with worker_processes(1, tmp_path, DATABASE_URL=TEST_DATABASE_URL):
            wait_until(lambda: len(outcomes(app)) == 1, 60, "the storm's one job")
        assert [row["status"] for row in outcomes(app)] == ["succeeded"]
        assert open_transactions() == []


def _registered_workers(url: str) -> int:
    connection = redis.Redis.from_url(url)
    try:
        return len(Worker.all(connection=connection))  # this test's Redis db: ours
    except redis.ConnectionError:
        return 0
    finally:
        connection.close()


def test_a_worker_started_while_redis_is_down_waits_for_it(app, make_app, llm, tmp_path,
                                                          own_redis):
    """Under a supervisor a worker that exits at once is restarted in a loop; it waits instead,
    and works once Redis answers."""
    service = make_app(REDIS_URL=own_redis.url)
    capture_on(service)
    llm.reply_items([])
    own_redis.stop()
    with worker_processes(1, tmp_path, REDIS_URL=own_redis.url) as (worker,):
        time.sleep(OUTAGE_S / 2)
        assert worker.poll() is None, "the worker exited while Redis was down"
        own_redis.start()
        body = event(eventId="evt-after-outage")
        assert _reason(deliver(service.test_client(), body)) == "enqueued"
        wait_until(lambda: len(outcomes(app)) == 1, 90, "the job delivered after the outage")
        assert worker.poll() is None
    assert [row["status"] for row in outcomes(app)] == ["succeeded"]


def test_a_job_that_redis_interrupts_is_not_failed(app, make_app, llm, tmp_path, own_redis):
    """Redis goes away while the model answers a job and comes back a few seconds later: the
    job still learns, and the worker lives on."""
    service = make_app(REDIS_URL=own_redis.url)
    capture_on(service)
    llm.reply_items([{"type": "user", "content": "报告一律用中文写"}], delay=3)
    body = event(eventId="evt-interrupted")
    assert _reason(deliver(service.test_client(), body)) == "enqueued"
    with worker_processes(1, tmp_path, REDIS_URL=own_redis.url) as (worker,):
        wait_until(lambda: len(llm.requests) == 1, 60, "the job asking the model")
        own_redis.stop()
        time.sleep(OUTAGE_S / 2)
        own_redis.start()
        wait_until(lambda: len(outcomes(app)) == 1, 90, "the interrupted job's outcome")
        assert worker.poll() is None
    assert [(row["status"], row["inserted"]) for row in outcomes(app)] == [("succeeded", 1)]
