"""Consolidation as operators run it: the cooldown across worker processes, its atomic claim,
the embedded setup on SQLite, and the outcome and metrics a consolidation leaves."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from datetime import timedelta

import pytest
import sqlalchemy as sa
from rq.job import JobStatus

from app.db_types import utcnow
from app.extensions import db
from app.extraction.models import ConsolidationState, JobOutcome
from app.extraction.trigger import COOLDOWN
from app.memory import rules
from app.memory.models import MemoryItem
from tests.completions import (
    USER_ID,
    capture_on,
    enqueue_consolidation,
    event,
    last_consolidation,
    outcomes,
    post_webhook,
    rq_job,
    rq_queue,
)
from tests.conftest import WEBHOOK_SECRET, assert_ok
from tests.workers import registered_workers, wait_until, worker_processes

USER_FACT = [{"type": "user", "content": "新学到的用户事实"}]


def _overlap(a, b) -> bool:
    return a.started < b.ended and b.started < a.ended


def test_the_cooldown_holds_across_two_worker_processes(app, llm, webhook, memories,
                                                        tmp_path):
    """Two workers finish an extraction of the same user at the same moment, each over the
    USER group's target: exactly one of them starts a consolidation."""
    capture_on(app)
    memories.bulk(USER_ID, [f"自动行{i}" for i in range(rules.CONSOLIDATE_USER_TARGET + 5)],
                  source="AUTO")
    for session in (1, 2):
        llm.reply_items([{"type": "user", "content": f"会话{session}学到的事实"}], delay=1)
    llm.reply_items([])  # the one consolidation; a second one would get no answer and fail
    queue = rq_queue(app)

    def all_done(job_ids: list[str]) -> bool:
        finished = all(rq_job(app, j).get_status() == JobStatus.FINISHED
                       for j in job_ids)
        return finished and queue.count == 0 and queue.started_job_registry.count == 0

    with worker_processes(2, tmp_path):
        wait_until(lambda: registered_workers() == 2, 60, "two registered workers")
        for session in (1, 2):
            assert_ok(webhook(event(sessionId=session)), 202)
        wait_until(lambda: len(outcomes(app)) >= 2, 60, "two extraction outcomes")
        extraction_jobs = [o["jobId"] for o in outcomes(app)[:2]]
        # Each extraction's trigger runs before its RQ job finishes: once both have, and the
        # queue is idle, every consolidation that was ever enqueued has run.
        wait_until(lambda: all_done(extraction_jobs), 60, "the extractions and what they queued")
        # A consolidation that met a transient failure (a conflict, under load) waits for its
        # retry in RQ's scheduled registry, not in the queue: its outcome comes a moment later.
        wait_until(lambda: len(outcomes(app)) >= 3, 60, "the consolidation's outcome")

    done = outcomes(app)
    assert sorted((o["kind"], o["status"]) for o in done) == \
        [("consolidation", "succeeded"), ("extraction", "succeeded"), ("extraction", "succeeded")]
    first, second, _ = llm.requests
    assert _overlap(first, second), "the two extractions did not run at the same time"
    workers = {rq_job(app, j).worker_name for j in extraction_jobs}
    assert len(workers) == 2


@pytest.mark.parametrize(("previous", "winners"), [
    pytest.param(None, 1, id="first-ever"),
    pytest.param(timedelta(hours=25), 1, id="expired"),
    pytest.param(timedelta(hours=1), 0, id="cooling-down"),
])
def test_one_of_many_concurrent_claims_passes_the_cooldown(app, previous, winners):
    """Eight transactions claim at once; the winner holds its claim a moment before committing,
    so the others really wait on it."""
    if previous is not None:
        last_consolidation(app, utcnow() - previous)
    barrier = threading.Barrier(8)
    results: list[bool] = []
    errors: list[BaseException] = []

    def claim() -> None:
        try:
            with app.app_context():
                barrier.wait()
                won = ConsolidationState.claim(USER_ID, utcnow(), COOLDOWN)
                if won:
                    time.sleep(0.3)
                db.session.commit()
                db.session.remove()
                results.append(won)
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=claim) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert errors == []
    assert sorted(results) == [False] * (8 - winners) + [True] * winners


def test_a_consolidation_outcome_is_recorded_and_counted_in_metrics(
        app, metrics, llm, run_jobs, memories, client, users, as_user):
    capture_on(app)
    a, b, c, d = memories.bulk(USER_ID, ["报告用中文", "总结用中文", "汇报用中文", "仓库用 pnpm"],
                               source="AUTO")
    llm.reply_items([{"op": "merge", "sourceIds": [a, b], "content": "报告和总结都用中文"},
                     {"op": "drop", "sourceIds": [c]}, {"op": "keep", "sourceIds": [d]}],
                    usage={"prompt_tokens": 900, "completion_tokens": 40, "total_tokens": 940})
    job_id = enqueue_consolidation(app)
    run_jobs()
    (outcome,) = outcomes(app)
    assert outcome["promptChars"] > 0 and outcome["durationMs"] >= 0
    assert {k: v for k, v in outcome.items()
            if k not in ("id", "createdAt", "promptChars", "durationMs")} == {
        "kind": "consolidation", "jobId": job_id, "eventId": None, "userId": USER_ID,
        "sessionId": None, "status": "succeeded", "reason": "consolidated", "attempts": 1,
        "model": "scripted-default", "promptTokens": 900, "completionTokens": 40,
        "totalTokens": 940, "inserted": 1, "touched": 0, "updated": 0, "dropped": 0,
        "demoted": 0, "stale": 0, "secretsDropped": 0, "scope": "USER", "projectKey": None,
        "rowsIn": 4, "rowsOut": 2, "merges": 1, "drops": 1}

    sample = metrics.added
    assert sample("memory_jobs_total", kind="consolidation", status="succeeded",
                  reason="consolidated") == 1
    assert sample("memory_job_duration_seconds_count", kind="consolidation") == 1
    assert sample("memory_llm_tokens_total", kind="consolidation", model="scripted-default",
                  type="prompt") == 900
    assert sample("memory_consolidation_rows_total", direction="in") == 4
    assert sample("memory_consolidation_rows_total", direction="out") == 2
    assert sample("memory_consolidation_operations_total", op="merge") == 1
    assert sample("memory_consolidation_operations_total", op="drop") == 1

    users.user("root", admin=True)
    page = assert_ok(as_user(users.token("root")).get("/api/v1/admin/outcomes?kind=consolidation"))
    assert page["records"] == [outcome]


# ---- the embedded setup (SQLite, no Redis) -----------------------------------------------

def test_the_migrations_build_the_consolidation_schema_on_sqlite(migrated_sqlite):
    with contextlib.closing(sqlite3.connect(migrated_sqlite)) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        columns = {r[1] for r in conn.execute("PRAGMA table_info(memory_job_outcome)")}
    assert "memory_consolidation_state" in tables
    assert {"scope", "project_key", "rows_in", "rows_out", "merges", "drops"} <= columns


def test_consolidation_runs_in_the_embedded_setup(embedded):
    """SQLite, one in-process thread: the trigger claims the cooldown and the job merges."""
    app, llm = embedded
    now = utcnow() - timedelta(days=1)
    contents = [f"自动行{i}" for i in range(rules.CONSOLIDATE_USER_TARGET)]
    with app.app_context():
        rows = [MemoryItem(user_id=USER_ID, scope="USER", project_key="", content=c,
                           source="AUTO", status="ACTIVE",
                           dedup_hash=rules.dedup_hash("USER", "", c), created_at=now,
                           updated_at=now + timedelta(seconds=i))
                for i, c in enumerate(contents)]
        db.session.add_all(rows)
        db.session.commit()
        first, second = rows[0].id, rows[1].id
        db.session.remove()
    llm.reply_items(USER_FACT)
    llm.reply_items([{"op": "merge", "sourceIds": [first, second], "content": "合并的两行"}])
    assert_ok(post_webhook(app.test_client(), event(), secret=WEBHOOK_SECRET), 202)
    assert app.extensions["memory_queue"].wait_idle(15)

    with app.app_context():
        done = [(o.kind, o.status, o.merges) for o in
                db.session.scalars(sa.select(JobOutcome).order_by(JobOutcome.id))]
        merged = db.session.scalar(sa.select(sa.func.count()).select_from(MemoryItem)
                                   .where(MemoryItem.source == "CONSOLIDATED"))
        claimed = db.session.get(ConsolidationState, USER_ID)
        db.session.remove()
    assert done == [("extraction", "succeeded", None), ("consolidation", "succeeded", 1)]
    assert merged == 1 and claimed is not None
