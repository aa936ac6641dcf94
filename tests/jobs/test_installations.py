"""Installations sharing a Redis never meet (SPEC §11): every key and queue of one lives under its
namespace, a worker never runs another installation's job, and an upgrade runs the jobs queued
under the old names. Two real installations (two databases) on one Redis db, real workers."""

from __future__ import annotations

import redis
import sqlalchemy as sa
from flask_migrate import upgrade
from rq import Queue

from app import create_app
from app.extensions import db
from app.extraction.queue import LEGACY_QUEUE_NAME
from app.system import service as system
from app.system.installation import installation
from tests.completions import (
    capture_on,
    event,
    only_outcome,
    outcomes,
    post_webhook,
    queued,
    rq_queue,
)
from tests.conftest import (
    TEST_DATABASE_URL,
    TEST_REDIS_URL,
    WEBHOOK_SECRET,
    _recreate_database,
    base_config,
)
from tests.workers import worker_processes


def _second_database() -> str:
    """A second installation's database, migrated from nothing (its own installation id)."""
    url = sa.make_url(TEST_DATABASE_URL)
    url = url.set(database=f"{url.database}_other").render_as_string(hide_password=False)
    _recreate_database(url)
    app = create_app(base_config(SQLALCHEMY_DATABASE_URI=url))
    with app.app_context():
        upgrade()
        db.engine.dispose()
    return url


def test_a_worker_never_runs_another_installations_job(app, make_app, llm, tmp_path):
    other_url = _second_database()
    other = make_app(SQLALCHEMY_DATABASE_URI=other_url)
    with app.app_context():
        ours = installation().namespace
    with other.app_context():
        theirs = installation().namespace
        system.add_model("scripted", "scripted-default", base_url=llm.base_url, default=True)
        db.session.remove()
    assert ours != theirs
    capture_on(other)
    llm.reply_items([{"type": "user", "content": "输出报告用中文"}])
    status, body = post_webhook(other.test_client(), event(), secret=WEBHOOK_SECRET)
    assert (status, body["data"]["reason"]) == (202, "enqueued")

    # Our worker (our database) works our queue only: their job is not ours to run.
    with worker_processes(1, tmp_path, burst=True) as (ours_worker,):
        assert ours_worker.wait(timeout=60) == 0
    assert llm.requests == [] and outcomes(app) == [] and outcomes(other) == []
    assert [job.meta["installation"] for job in queued(other)] == [theirs]
    assert rq_queue(other).name == f"memory:{theirs}"

    # Their worker runs it against their database.
    (tmp_path / "theirs").mkdir()
    with worker_processes(1, tmp_path / "theirs", burst=True,
                         DATABASE_URL=other_url) as (their_worker,):
        assert their_worker.wait(timeout=60) == 0
    assert (only_outcome(other)["status"], only_outcome(other)["inserted"]) == ("succeeded", 1)
    assert outcomes(app) == []
    keys = redis.Redis.from_url(TEST_REDIS_URL).keys("*")
    assert not [k for k in keys if b"memory" in k and ours.encode() not in k
                and theirs.encode() not in k], "a key of ours outside both namespaces"


def test_an_upgrade_runs_the_jobs_queued_under_the_old_queue_name(app, llm, webhook, tmp_path):
    """A job queued by the previous release (queue `memory`, no installation in its meta) is
    moved into the installation's queue by the first worker, and runs."""
    capture_on(app)
    llm.reply_items([{"type": "user", "content": "输出报告用中文"}])
    assert webhook(event())[0] == 202
    connection = redis.Redis.from_url(TEST_REDIS_URL)
    try:
        (job,) = queued(app)
        # As the previous release queued it: under the old name, without the new meta.
        rq_queue(app).remove(job.id)
        for key in ("installation", "namespace"):
            job.meta.pop(key)
        job.save_meta()
        Queue(LEGACY_QUEUE_NAME, connection=connection).enqueue_job(job)
    finally:
        connection.close()
    assert queued(app) == []
    with worker_processes(1, tmp_path, burst=True) as (worker,):
        assert worker.wait(timeout=60) == 0
    assert (only_outcome(app)["status"], only_outcome(app)["inserted"]) == ("succeeded", 1)
