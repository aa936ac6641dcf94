"""`flask --app wsgi prune` (docs/operations.md, Retention): old webhook events and job outcomes
go, while idempotency (a delivery the platform may still retry) and provenance (the journal of
every existing memory) stay whole."""

from __future__ import annotations

from datetime import timedelta

import sqlalchemy as sa

from app.db_types import utcnow
from app.extensions import db
from app.extraction.models import JobOutcome, WebhookEvent
from app.memory.models import MemoryEvent
from tests.completions import USER_ID, capture_on, event
from tests.conftest import assert_ok


def _age(app, model, column: str, days: float, **where) -> None:
    with app.app_context():
        db.session.execute(sa.update(model).filter_by(**where)
                           .values({column: utcnow() - timedelta(days=days)}))
        db.session.commit()
        db.session.remove()


def _count(app, model, **where) -> int:
    with app.app_context():
        found = db.session.scalar(sa.select(sa.func.count()).select_from(model)
                                  .filter_by(**where))
        db.session.remove()
        return found


def _outcome(app, job_id: str, days: float) -> None:
    with app.app_context():
        db.session.add(JobOutcome(kind="extraction", job_id=job_id, user_id=USER_ID,
                                  status="skipped", reason="no_model", attempts=1, inserted=0,
                                  touched=0, updated=0, dropped=0, demoted=0, duration_ms=1,
                                  created_at=utcnow() - timedelta(days=days)))
        db.session.commit()
        db.session.remove()


def test_events_older_than_the_horizon_go_younger_ones_still_answer_duplicate(app, runner,
                                                                              webhook):
    capture_on(app)
    old, young = event(), event()
    assert_ok(webhook(old), 202), assert_ok(webhook(young), 202)
    _age(app, WebhookEvent, "received_at", 31, event_id=old["eventId"])
    _age(app, WebhookEvent, "received_at", 29, event_id=young["eventId"])
    result = runner.invoke(args=["prune"])
    assert result.exit_code == 0, result.output
    assert "webhook_event=1 " in result.output
    assert _count(app, WebhookEvent, event_id=old["eventId"]) == 0
    assert assert_ok(webhook(young), 202)["reason"] == "duplicate_event"


def test_old_job_outcomes_go_recent_ones_stay(app, runner):
    _outcome(app, "old-job", 91)
    _outcome(app, "recent-job", 1)
    result = runner.invoke(args=["prune"])
    assert result.exit_code == 0 and "memory_job_outcome=1 " in result.output, result.output
    assert [_count(app, JobOutcome, job_id=j) for j in ("old-job", "recent-job")] == [0, 1]


def test_the_journal_of_an_existing_memory_is_kept_whatever_its_age(app, runner, as_service):
    status, item = as_service(USER_ID).post("/api/v1/memory", {"scope": "USER",
                                                               "content": "报告用中文写"})
    assert status == 201, item
    _age(app, MemoryEvent, "at", 3650, memory_id=item["data"]["id"])
    with app.app_context():
        db.session.add(MemoryEvent(memory_id=item["data"]["id"] + 1000, user_id=USER_ID,
                                   type="CREATED", actor="USER", after="gone",
                                   at=utcnow() - timedelta(days=1)))
        db.session.commit()
        db.session.remove()
    result = runner.invoke(args=["prune", "--events-days", "2", "--outcomes-days", "1"])
    assert result.exit_code == 0 and "memory_event(orphaned)=1 " in result.output, result.output
    history = as_service(USER_ID).get(f"/api/v1/memory/{item['data']['id']}/history")
    assert history[0] == 200 and [e["type"] for e in history[1]["data"]] == ["CREATED"]


def test_a_horizon_shorter_than_a_retry_window_is_refused_in_one_line(app, runner):
    result = runner.invoke(args=["prune", "--events-days", "1"])
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        "Error: --events-days must be at least 2: a webhook event row is what answers a "
        "repeated delivery duplicate_event"]


def test_dry_run_counts_and_removes_nothing(app, runner):
    _outcome(app, "old-job", 100)
    result = runner.invoke(args=["prune", "--dry-run"])
    assert result.exit_code == 0 and "would remove:" in result.output
    assert "memory_job_outcome=1 " in result.output
    assert _count(app, JobOutcome, job_id="old-job") == 1
