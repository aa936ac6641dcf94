"""The embedded default: SQLite, no Redis, the same job code on one in-process thread."""

from __future__ import annotations

import contextlib
import sqlite3

import sqlalchemy as sa

from app.extensions import db
from app.extraction.models import JobOutcome, WebhookEvent
from app.extraction.queue import InProcessJobQueue
from app.memory.models import MemoryItem
from app.sessions.models import PlatformSession
from tests.completions import USER_ID, event, post_webhook
from tests.conftest import WEBHOOK_SECRET, assert_ok


def _count(app, model, **filters) -> int:
    with app.app_context():
        query = sa.select(sa.func.count()).select_from(model)
        for name, value in filters.items():
            query = query.where(getattr(model, name) == value)
        total = db.session.scalar(query)
        db.session.remove()
        return total


def test_migrations_build_the_pipeline_tables_on_sqlite(migrated_sqlite):
    with contextlib.closing(sqlite3.connect(migrated_sqlite)) as conn:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    assert {"webhook_event", "memory_job_outcome", "idx_memory_job_outcome_user"} <= names


def test_the_embedded_setup_runs_the_whole_pipeline_in_process(embedded):
    app, llm = embedded
    queue = app.extensions["memory_queue"]
    assert isinstance(queue, InProcessJobQueue)
    llm.reply_items([{"type": "user", "content": "输出报告用中文"},
                     {"type": "project", "content": "仓库统一用 pnpm"}])
    client = app.test_client()
    body = event()
    data = assert_ok(post_webhook(client, body, secret=WEBHOOK_SECRET), 202)
    assert data == {"accepted": True, "enqueued": True, "reason": "enqueued"}
    assert queue.wait_idle(15)

    assert _count(app, MemoryItem, source="AUTO", status="ACTIVE") == 2
    assert _count(app, MemoryItem, scope="PROJECT", project_key="mao") == 1
    assert _count(app, JobOutcome, status="succeeded", inserted=2) == 1
    # Idempotency and the session upsert hold on SQLite too.
    repeat = assert_ok(post_webhook(client, body, secret=WEBHOOK_SECRET), 202)
    assert repeat["reason"] == "duplicate_event"
    assert_ok(post_webhook(client, event(projectKey="blog", phase="FAILED"),
                           secret=WEBHOOK_SECRET), 202)
    assert queue.wait_idle(5)
    assert _count(app, WebhookEvent) == 2 and _count(app, JobOutcome) == 1
    assert _count(app, PlatformSession, project_key="blog") == 1
    assert len(llm.requests) == 1


def test_the_embedded_setup_retries_in_process(embedded):
    app, llm = embedded
    llm.reply(status=503)
    llm.reply_items([{"type": "user", "content": "输出报告用中文"}])
    assert_ok(post_webhook(app.test_client(), event(), secret=WEBHOOK_SECRET), 202)
    queue = app.extensions["memory_queue"]
    assert queue.wait_idle(15)
    assert _count(app, JobOutcome, status="succeeded", attempts=2) == 1
    assert len(llm.requests) == 2


def test_a_user_first_seen_in_an_embedded_webhook_is_created(embedded):
    from app.auth.models import User

    app, _ = embedded
    body = event(userId=31337, sessionId=9)
    data = assert_ok(post_webhook(app.test_client(), body, secret=WEBHOOK_SECRET), 202)
    assert data["reason"] == "auto_capture_disabled"
    assert _count(app, User, id=31337) == 1 and _count(app, PlatformSession, user_id=31337) == 1


def test_an_insert_into_a_full_pool_demotes_on_the_embedded_setup_too(embedded):
    """D14 on SQLite: the insert and the demotion of the group's stalest machine-made row are one
    batch there too (its statements named a bind parameter like a column of the table, which
    SQLite's execution path refused)."""
    from app.memory import rules

    app, llm = embedded
    with app.app_context():
        for n in range(rules.ACTIVE_PER_USER_MAX):
            db.session.add(MemoryItem(
                user_id=USER_ID, scope="USER", project_key="", content=f"旧的事实 {n}",
                source="AUTO", status="ACTIVE",
                dedup_hash=rules.dedup_hash("USER", "", f"旧的事实 {n}")))
        db.session.commit()
        db.session.remove()
    llm.reply_items([{"type": "user", "content": "输出报告用中文"}])
    assert_ok(post_webhook(app.test_client(), event(), secret=WEBHOOK_SECRET), 202)
    assert app.extensions["memory_queue"].wait_idle(15)
    assert _count(app, JobOutcome, status="succeeded", inserted=1, demoted=1) == 1
    assert _count(app, MemoryItem, status="ACTIVE") == rules.ACTIVE_PER_USER_MAX
