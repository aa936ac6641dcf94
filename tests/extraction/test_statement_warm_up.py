"""The worker runs every statement of a job once before it forks (`pipeline.warm_up`), so the
horses it forks find them compiled."""

from __future__ import annotations

from app.db_types import utcnow
from app.extensions import db
from app.extraction import pipeline
from tests.conftest import assert_ok
from tests.extraction.support import USER_ID, capture_on, event, last_consolidation, script
from tests.reliability.conftest import snapshot


def test_statement_warm_up_changes_no_row(app, memories):
    memories.add(USER_ID, "用中文写报告", source="AUTO")
    before = snapshot(app)
    with app.app_context():
        pipeline.warm_up()
    assert snapshot(app) == before


def test_after_statement_warm_up_a_job_compiles_nothing_new(app, llm, webhook, run_jobs,
                                                            memories):
    memories.add(USER_ID, "部署前先跑测试", source="AUTO")
    capture_on(app)
    last_consolidation(app, utcnow())
    script(llm, [{"type": "user", "action": "insert", "content": "报告用中文写"}])
    assert assert_ok(webhook(event()), 202)["enqueued"] is True
    with app.app_context():
        pipeline.warm_up()
        cache = db.engine._compiled_cache
        warmed = set(cache.keys())
    run_jobs()
    with app.app_context():
        new = {k: str(v) for k, v in db.engine._compiled_cache.items() if k not in warmed}
        assert new == {}
    assert memories.count(USER_ID, content="报告用中文写") == 1
