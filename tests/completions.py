"""Helpers of the pipeline tests: signed webhook calls, event bodies, running queued jobs, the
consolidation cooldown."""

from __future__ import annotations

import json
import signal
import time
import uuid
from datetime import datetime
from typing import Any

import pymysql
import redis
import sqlalchemy as sa
from flask import Flask
from flask.testing import FlaskClient
from rq import Queue
from rq.job import Job

from app.db_types import utcnow
from app.extensions import db
from app.extraction.consolidation import ConsolidationJob
from app.extraction.models import ConsolidationState, JobOutcome
from app.extraction.queue import memory_queue, rq_job_id
from app.memory import service as memory_service
from app.memory.models import MemoryItem
from app.memory.rules import Group
from app.platform.webhook import signature
from app.system.installation import installation
from jobs import CONSOLIDATION
from jobs.worker import AppSimpleWorker

WEBHOOK_PATH = "/api/v1/webhooks/task-completed"
USER_ID = 7
SESSION_ID = 101
# Long enough for D11 (≥ 20 code points), two facts worth remembering.
USER_MESSAGE = "以后输出报告都用中文写,另外我们这个仓库统一用 pnpm 管理依赖。"
ASSISTANT_MESSAGE = "好的,报告已用中文写好,依赖也改成用 pnpm 安装了。"


def event(**fields: Any) -> dict[str, Any]:
    """A COMPLETED main-session event of USER_ID in project `mao`; fields override."""
    body = {"eventId": f"evt-{uuid.uuid4().hex}", "sessionId": SESSION_ID, "userId": USER_ID,
            "projectKey": "mao", "workspace": "/home/dev/mao", "sessionType": "NORMAL",
            "channel": "WEB", "phase": "COMPLETED", "lastUserMessage": USER_MESSAGE,
            "lastAssistantMessage": ASSISTANT_MESSAGE}
    body.update(fields)
    return body


def signed_headers(raw: bytes, secret: str, timestamp: int | None = None) -> dict[str, str]:
    stamp = str(int(time.time()) if timestamp is None else timestamp)
    return {"X-Memory-Timestamp": stamp, "X-Memory-Signature": signature(secret, stamp, raw)}


def post_webhook(client: FlaskClient, body: Any, *, secret: str,
                 headers: dict[str, str] | None = None) -> tuple[int, Any]:
    """POST a body (dict, or raw bytes) signed with `secret` unless headers are given."""
    raw = body if isinstance(body, bytes) else json.dumps(body, ensure_ascii=False).encode()
    response = client.post(WEBHOOK_PATH, data=raw, content_type="application/json",
                           headers=headers if headers is not None else signed_headers(raw, secret))
    return response.status_code, response.get_json()


def last_consolidation(app: Flask, started_at: datetime, user_id: int = USER_ID) -> None:
    """Record that the user's last D15 consolidation started at `started_at` (its cooldown)."""
    with app.app_context():
        db.session.merge(ConsolidationState(user_id=user_id, last_started_at=started_at))
        db.session.commit()
        db.session.remove()


def capture_on(app: Flask, user_id: int = USER_ID, enabled: bool = True) -> None:
    """The user exists and has auto-capture switched as given (the API's own path)."""
    from app.auth.service import ensure_user

    with app.app_context():
        ensure_user(user_id)
        memory_service.set_auto_capture(user_id, enabled)
        db.session.remove()


class BurstWorker(AppSimpleWorker):
    """The app's in-process worker class, minus RQ's command channel (stop-job / shutdown
    messages over pubsub), which a burst in a test never receives: its listener thread only
    costs a one-second join at the end of every burst."""

    def subscribe(self) -> None:
        return None

    def unsubscribe(self) -> None:
        return None


def rq_queue(app: Flask) -> Queue:
    """The app's RQ queue (`memory:<namespace>`; the namespace is read in an app context)."""
    with app.app_context():
        return memory_queue().rq_queue()


def queue_name(app: Flask) -> str:
    return rq_queue(app).name


def rq_job(app: Flask, job_id: str) -> Job:
    """The RQ job of one of our job ids (an outcome's `jobId`)."""
    with app.app_context():
        return Job.fetch(rq_job_id(installation().namespace, job_id),
                         connection=memory_queue().redis)


def run_jobs(app: Flask, timeout_s: float = 30) -> None:
    """Run every queued job in this process with the app's worker class, retries included.

    A burst with the scheduler enqueues the retries that are due; the loop waits for the rest.
    """
    connection = redis.Redis.from_url(app.config["REDIS_URL"])
    queue = Queue(queue_name(app), connection=connection)
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            worker = BurstWorker([queue], connection=connection, app=app)
            worker.work(burst=True, with_scheduler=True)
            if queue.count == 0 and queue.scheduled_job_registry.count == 0:
                return
            assert time.monotonic() < deadline, "queued jobs did not finish in time"
            time.sleep(0.05)
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
        connection.close()


def script(llm: Any, reply: Any) -> None:
    """Queue the model's answer: a list is sent as a JSON array, a string as is, None: no call."""
    if isinstance(reply, list):
        llm.reply_items(reply)
    elif reply is not None:
        llm.reply(reply)


def enqueue_consolidation(app: Flask, project_key: str | None = None,
                          user_id: int = USER_ID) -> str:
    """Enqueue the consolidation of one group (None: USER) as the trigger does; its job id."""
    with app.app_context():
        job = ConsolidationJob(user_id, Group(project_key))
        job_id = job.job_id(utcnow())
        memory_queue().enqueue(CONSOLIDATION, job.payload(), job_id)
    return job_id


def memory_rows(app: Flask) -> dict[int, dict[str, Any]]:
    """Every memory row, every column, by id: to compare the whole table before and after."""
    with app.app_context():
        rows = db.session.execute(sa.select(MemoryItem.__table__)).mappings().all()
        data = {r["id"]: dict(r) for r in rows}
        db.session.remove()
        return data


def outcomes(app: Flask) -> list[dict[str, Any]]:
    """Every outcome row, oldest first."""
    with app.app_context():
        rows = db.session.scalars(sa.select(JobOutcome).order_by(JobOutcome.id)).all()
        data = [r.to_dict() for r in rows]
        db.session.remove()
        return data


def only_outcome(app: Flask) -> dict[str, Any]:
    rows = outcomes(app)
    assert len(rows) == 1, rows
    return rows[0]


def in_open_transaction(app: Flask, statement: str, *args: Any) -> pymysql.Connection:
    """Run `statement` on a connection of its own in a transaction left open: the row locks it
    takes are held until the caller's commit() (a slow writer, another request)."""
    url = sa.make_url(app.config["SQLALCHEMY_DATABASE_URI"])
    conn = pymysql.connect(host=url.host, port=url.port or 3306, user=url.username,
                           password=url.password or "", database=url.database)
    conn.begin()
    with conn.cursor() as cursor:
        cursor.execute(statement, args)
    return conn


def wait_for_blocked(engine: sa.Engine, *statements: str, timeout_s: float = 15,
                     at_least: int = 1) -> bool:
    """Poll until `at_least` other connections to this test database have been stuck for 200 ms
    in a statement starting with one of `statements` (default INSERT, UPDATE), i.e. wait for a
    lock we hold (True), or time out (False).

    PROCESSLIST is live; INNODB_TRX is not (a server-wide cache that frequent readers keep
    from refreshing), so it cannot be polled.
    """
    starts = " OR ".join(f"INFO LIKE '{s}%'" for s in statements or ("INSERT", "UPDATE"))
    query = sa.text(
        "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = DATABASE() "
        f"AND ID <> CONNECTION_ID() AND COMMAND = 'Query' AND TIME_MS > 200 AND ({starts})")
    deadline = time.monotonic() + timeout_s
    with engine.connect() as probe:
        while time.monotonic() < deadline:
            if probe.execute(query).scalar() >= at_least:
                return True
            probe.rollback()
            time.sleep(0.05)
    return False


def queued(app: Flask) -> list:
    """The jobs waiting in the app's RQ queue `memory`."""
    connection = redis.Redis.from_url(app.config["REDIS_URL"])
    try:
        return Queue(queue_name(app), connection=connection).get_jobs()
    finally:
        connection.close()


def rows(app: Flask, model: Any) -> list:
    """Every row of `model`'s table, detached."""
    with app.app_context():
        found = db.session.scalars(sa.select(model)).all()
        db.session.expunge_all()
        db.session.remove()
        return found
