"""The embedded default: SQLite, no Redis, the same job code on one in-process thread."""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from app import create_app
from app.auth.service import ensure_user
from app.extensions import db
from app.extraction.models import JobOutcome, WebhookEvent
from app.extraction.queue import InProcessJobQueue
from app.memory import service as memory_service
from app.memory.models import MemoryItem
from app.sessions.models import PlatformSession
from app.system import service as system
from tests.conftest import WEBHOOK_SECRET, assert_ok
from tests.extraction.support import USER_ID, event, post_webhook
from tests.jobs.workers import ROOT, worker_env
from tests.llm_server import ScriptedLlm


@pytest.fixture(scope="module")
def migrated_sqlite(tmp_path_factory) -> Path:
    """An empty SQLite file migrated by `flask --app wsgi db upgrade`, once per module."""
    path = tmp_path_factory.mktemp("embedded") / "migrated.sqlite3"
    env = worker_env(DATABASE_URL=f"sqlite:///{path}")
    env.pop("REDIS_URL")
    result = subprocess.run([sys.executable, "-m", "flask", "--app", "wsgi", "db", "upgrade"],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return path


@pytest.fixture
def embedded(migrated_sqlite, tmp_path, monkeypatch):
    """A copy of the migrated SQLite file, an app without REDIS_URL, a user with auto-capture
    on, and the scripted LLM as the default model."""
    path = tmp_path / "embedded.sqlite3"
    shutil.copyfile(migrated_sqlite, path)
    url = f"sqlite:///{path}"
    llm = ScriptedLlm()
    monkeypatch.setenv("OPENAI_API_KEY", "test-openai-key")
    app = create_app({"TESTING": True, "SQLALCHEMY_DATABASE_URI": url, "REDIS_URL": None,
                      "MEMORY_WEBHOOK_SECRET": WEBHOOK_SECRET, "MEMORY_LLM_TIMEOUT_S": 5.0,
                      "MEMORY_RETRY_DELAYS_S": (1,)})
    with app.app_context():
        system.add_model("scripted", "scripted-default", base_url=llm.base_url, default=True)
        ensure_user(USER_ID)
        memory_service.set_auto_capture(USER_ID, True)
        db.session.remove()
    yield app, llm
    llm.close()
    with app.app_context():
        db.session.remove()
        db.engine.dispose()
    app.extensions["readpool"].engine.dispose()


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
    assert {"webhook_event", "memory_job_outcome", "idx_memory_job_outcome_metrics"} <= names


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
