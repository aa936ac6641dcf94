"""When consolidation runs (seed §10.3 D15 trigger, §10.6): at the end of an extraction that
persisted something, when the pool or a written group is too big, once per 24 hours. Every
task goes through the webhook, and its extraction and whatever that enqueues through the real
RQ worker."""

from __future__ import annotations

from datetime import timedelta

import pytest
import redis
import sqlalchemy as sa

from app.db_types import utcnow
from app.extensions import db
from app.extraction import trigger
from app.extraction.models import ConsolidationState
from app.extraction.queue import RedisJobQueue
from app.memory.rules import CONSOLIDATE_PROJECT_TARGET, CONSOLIDATE_USER_TARGET
from jobs import CONSOLIDATION
from tests.completions import (
    USER_ID,
    capture_on,
    event,
    last_consolidation,
    memory_rows,
    outcomes,
    script,
)
from tests.conftest import assert_ok

USER_FACT = [{"type": "user", "content": "新学到的用户事实"}]
PROJECT_FACT = [{"type": "project", "content": "新学到的项目事实"}]


@pytest.fixture
def finish_task(app, llm, webhook, run_jobs):
    """`finish_task(extraction_reply, *consolidation_replies)` → every outcome, oldest first.

    One finished task of USER_ID in project `mao`, through the webhook; the replies are the
    model's answers in the order the calls come (replies as for `extract`).
    """
    capture_on(app)

    def run(extraction_reply, *consolidation_replies) -> list[dict]:
        for reply in (extraction_reply, *consolidation_replies):
            script(llm, reply)
        assert assert_ok(webhook(event()), 202)["enqueued"] is True
        run_jobs()
        assert llm.pending == 0, "a scripted reply was not asked for"
        return outcomes(app)

    return run


def jobs(done: list[dict]) -> list[tuple]:
    return [(o["kind"], o["status"], o["scope"], o["projectKey"]) for o in done]


def last_started(app) -> object:
    with app.app_context():
        value = db.session.scalar(sa.select(ConsolidationState.last_started_at)
                                  .where(ConsolidationState.user_id == USER_ID))
        db.session.remove()
        return value


EXTRACTED = ("extraction", "succeeded", None, None)


# ---- all three conditions hold ---------------------------------------------------------

def test_a_pool_over_150_active_rows_consolidates_the_written_group(
        app, finish_task, llm, memories):
    memories.bulk(USER_ID, [f"blog 手写{i}" for i in range(140)], scope="PROJECT",
                  project_key="blog")
    memories.bulk(USER_ID, [f"用户自动{i}" for i in range(5)], source="AUTO")
    memories.bulk(USER_ID, [f"mao 自动{i}" for i in range(5)], scope="PROJECT",
                  project_key="mao", source="AUTO")
    started = utcnow()
    # 150 ACTIVE rows; the extraction's insert makes 151. The USER group (6) is under its
    # target, and the mao group was not written: only the USER group is consolidated.
    done = finish_task(USER_FACT, [])
    assert jobs(done) == [EXTRACTED, ("consolidation", "succeeded", "USER", None)]
    assert done[1]["rowsIn"] == 6
    assert "新学到的用户事实" in llm.requests[1].prompt
    assert last_started(app) >= started


@pytest.mark.parametrize(("rows", "fact", "consolidated"), [
    pytest.param({"source": "AUTO"}, USER_FACT, ("USER", None), id="user"),
    pytest.param({"scope": "PROJECT", "project_key": "mao", "source": "AUTO"}, PROJECT_FACT,
                 ("PROJECT", "mao"), id="project"),
])
def test_a_written_group_over_its_target_is_consolidated(
        finish_task, memories, rows, fact, consolidated):
    target = CONSOLIDATE_USER_TARGET if rows.get("scope") is None else CONSOLIDATE_PROJECT_TARGET
    memories.bulk(USER_ID, [f"自动行{i}" for i in range(target)], **rows)
    done = finish_task(fact, [])
    assert jobs(done) == [EXTRACTED, ("consolidation", "succeeded", *consolidated)]
    assert done[1]["rowsIn"] == target + 1


def test_manual_rows_count_towards_a_groups_target(finish_task, memories):
    memories.bulk(USER_ID, [f"手写行{i}" for i in range(CONSOLIDATE_USER_TARGET - 2)])
    memories.bulk(USER_ID, ["自动行甲", "自动行乙"], source="AUTO")
    done = finish_task(USER_FACT, [])
    assert jobs(done) == [EXTRACTED, ("consolidation", "succeeded", "USER", None)]
    assert done[1]["rowsIn"] == 3


def test_a_rewrite_is_new_information_too(finish_task, memories):
    ids = memories.bulk(USER_ID, [f"自动行{i}" for i in range(CONSOLIDATE_USER_TARGET + 1)],
                        source="AUTO")
    done = finish_task([{"type": "user", "action": "update", "existingId": ids[0],
                         "content": "更完整的表述"}], [])
    assert done[0]["updated"] == 1
    assert jobs(done) == [EXTRACTED, ("consolidation", "succeeded", "USER", None)]


def test_after_consolidation_the_groups_are_within_their_targets(
        app, llm, webhook, run_jobs, memories):
    """The whole chain: a task's extraction writes into an over-full USER and project group;
    both are consolidated and, when the model merges as asked, end within their targets."""
    capture_on(app)
    memories.bulk(USER_ID, [f"手写的用户事实{i}" for i in range(5)])
    user_auto = memories.bulk(USER_ID, [f"用户事实{i}" for i in range(40)], source="AUTO")
    mao_auto = memories.bulk(USER_ID, [f"项目事实{i}" for i in range(70)], scope="PROJECT",
                             project_key="mao", source="AUTO")
    script(llm, USER_FACT + PROJECT_FACT)
    for name, ids in (("用户", user_auto), ("项目", mao_auto[:40])):
        script(llm, [{"op": "merge", "sourceIds": ids[i:i + 2], "content": f"合并的{name}事实{i}"}
                     for i in range(0, len(ids), 2)])
    assert_ok(webhook(event()), 202)
    run_jobs()
    assert llm.pending == 0
    done = outcomes(app)
    assert jobs(done) == [EXTRACTED, ("consolidation", "succeeded", "USER", None),
                          ("consolidation", "succeeded", "PROJECT", "mao")]
    assert [(o["rowsIn"], o["rowsOut"], o["merges"]) for o in done[1:]] == \
        [(41, 21, 20), (71, 51, 20)]
    # The model was told how far each group's machine rows must come down.
    assert "不超过 25 条" in llm.requests[1].prompt and "不超过 60 条" in llm.requests[2].prompt
    rows = [r for r in memory_rows(app).values() if r["status"] == "ACTIVE"]
    user_group = [r for r in rows if r["scope"] == "USER"]
    mao_group = [r for r in rows if r["project_key"] == "mao"]
    assert len(user_group) == 26 <= CONSOLIDATE_USER_TARGET
    assert len(mao_group) == 51 <= CONSOLIDATE_PROJECT_TARGET
    assert sum(r["source"] == "MANUAL" for r in user_group) == 5


# ---- a condition missing: no LLM call --------------------------------------------------

@pytest.mark.parametrize("reply", [
    pytest.param([], id="nothing-to-remember"),
    pytest.param([{"type": "user", "action": "touch", "existingId": "FIRST"}], id="touch"),
    pytest.param([{"type": "user", "content": "已忽略的事实"}], id="dismissed-duplicate"),
    pytest.param("not json", id="abandoned"),
])
def test_an_extraction_that_persisted_nothing_does_not_consolidate(
        app, finish_task, llm, memories, reply):
    ids = memories.bulk(USER_ID, [f"自动行{i}" for i in range(40)], source="AUTO")
    memories.add(USER_ID, "已忽略的事实", source="AUTO", status="DISMISSED")
    if isinstance(reply, list) and reply and reply[0].get("existingId") == "FIRST":
        reply = [{**reply[0], "existingId": ids[0]}]
    done = finish_task(reply)
    assert [o["kind"] for o in done] == ["extraction"] and len(llm.requests) == 1
    assert last_started(app) is None


def test_a_pool_of_150_with_groups_at_their_targets_does_not_consolidate(
        app, finish_task, llm, memories):
    memories.bulk(USER_ID, [f"用户自动{i}" for i in range(CONSOLIDATE_USER_TARGET - 1)],
                  source="AUTO")
    memories.bulk(USER_ID, [f"mao 自动{i}" for i in range(CONSOLIDATE_PROJECT_TARGET - 1)],
                  scope="PROJECT", project_key="mao", source="AUTO")
    memories.bulk(USER_ID, [f"blog 手写{i}" for i in range(150 - 2 - 29 - 59)],
                  scope="PROJECT", project_key="blog")
    done = finish_task(USER_FACT + PROJECT_FACT)
    assert done[0]["inserted"] == 2 and memories.count(USER_ID, status="ACTIVE") == 150
    assert [o["kind"] for o in done] == ["extraction"] and len(llm.requests) == 1
    assert last_started(app) is None


def test_a_group_with_fewer_than_two_machine_rows_is_not_consolidated(
        app, finish_task, llm, memories):
    memories.bulk(USER_ID, [f"手写行{i}" for i in range(40)])
    done = finish_task(USER_FACT)
    assert [o["kind"] for o in done] == ["extraction"] and len(llm.requests) == 1
    assert last_started(app) is None


@pytest.mark.parametrize(("hours_ago", "consolidates"), [(0.1, False), (23.9, False),
                                                         (24.1, True)])
def test_the_24_hour_cooldown(app, finish_task, llm, memories, hours_ago, consolidates):
    memories.bulk(USER_ID, [f"自动行{i}" for i in range(CONSOLIDATE_USER_TARGET)],
                  source="AUTO")
    previous = utcnow() - timedelta(hours=hours_ago)
    last_consolidation(app, previous)
    done = finish_task(USER_FACT, *([[]] if consolidates else []))
    assert [o["kind"] for o in done] == ["extraction", "consolidation"][:1 + consolidates]
    assert len(llm.requests) == 1 + consolidates
    assert (last_started(app) > previous) is consolidates


def test_the_cooldown_is_not_spent_when_the_jobs_cannot_be_enqueued(
        app, finish_task, llm, memories, monkeypatch):
    """Redis refusing the consolidation job (fault injected at our own enqueue) rolls the claim
    back; the extraction, committed before, is not affected."""
    enqueue = RedisJobQueue.enqueue

    def refuse_consolidation(self, kind, payload, job_id):
        if kind is CONSOLIDATION:
            raise redis.ConnectionError("injected: Redis is down")
        return enqueue(self, kind, payload, job_id)

    monkeypatch.setattr(RedisJobQueue, "enqueue", refuse_consolidation)
    memories.bulk(USER_ID, [f"自动行{i}" for i in range(CONSOLIDATE_USER_TARGET)],
                  source="AUTO")
    done = finish_task(USER_FACT)
    assert [(o["kind"], o["status"], o["inserted"]) for o in done] == \
        [("extraction", "succeeded", 1)]
    assert last_started(app) is None


def test_nothing_is_counted_for_a_user_with_no_more_memories_than_the_smallest_target():
    """No group holds more rows than its user: with at most 30 ACTIVE memories none can be over
    its target, so the trigger's counts are not even asked."""
    assert not trigger.may_be_due(CONSOLIDATE_USER_TARGET)
    assert trigger.may_be_due(CONSOLIDATE_USER_TARGET + 1)
    assert trigger.may_be_due(None)
