"""The 200 ACTIVE cap for machine writes (seed §10.2 D14), and writes under concurrency."""

from __future__ import annotations

import threading
from datetime import timedelta

import sqlalchemy as sa

from app.db_types import utcnow
from app.extensions import db
from app.extraction.models import JobOutcome
from app.extraction.runner import run_extraction
from app.memory.models import MemoryItem
from tests.completions import USER_ID, capture_on, event, wait_for_blocked
from tests.conftest import TEST_DATABASE_URL, assert_error, assert_ok

LONG_AGO = utcnow() - timedelta(days=30)


def counts(outcome: dict) -> tuple[int, int, int, int, int]:
    return (outcome["inserted"], outcome["touched"], outcome["updated"], outcome["dropped"],
            outcome["demoted"])


def fill(memories, contents_by_group: list[tuple[str, int, dict]]) -> dict[str, list[int]]:
    """Rows oldest group first: [(name, how many, row fields)] → {name: ids oldest first}."""
    ids, at = {}, LONG_AGO
    for name, count, fields in contents_by_group:
        ids[name] = memories.bulk(USER_ID, [f"{name}-{i:03d}" for i in range(count)],
                                  updated_at=at, **fields)
        at += timedelta(hours=1)
    return ids


def test_full_pool_demotes_oldest_machine_row(extract, memories):
    rows = fill(memories, [("manual-oldest", 150, {}), ("auto", 50, {"source": "AUTO"})])
    oldest = memories.get(rows["auto"][0])
    outcome = extract([{"type": "user", "content": "一条新学到的事实"}])
    assert counts(outcome) == (1, 0, 0, 0, 1)
    demoted = memories.get(rows["auto"][0])
    assert demoted["status"] == "DISMISSED" and demoted["rawUpdatedAt"] > oldest["rawUpdatedAt"]
    assert memories.get(rows["auto"][1])["status"] == "ACTIVE"
    assert memories.count(USER_ID, status="ACTIVE") == 200
    assert memories.count(USER_ID, status="ACTIVE", source="MANUAL") == 150


def test_consolidated_rows_are_machine_made_and_may_be_demoted(extract, memories):
    rows = fill(memories, [("consolidated", 1, {"source": "CONSOLIDATED"}),
                           ("auto", 199, {"source": "AUTO"})])
    assert counts(extract([{"type": "user", "content": "新事实"}])) == (1, 0, 0, 0, 1)
    assert memories.get(rows["consolidated"][0])["status"] == "DISMISSED"


def test_demotion_stays_in_the_affected_group(extract, memories):
    rows = fill(memories, [
        ("mao-auto", 40, {"source": "AUTO", "scope": "PROJECT", "project_key": "mao"}),
        ("blog-auto", 40, {"source": "AUTO", "scope": "PROJECT", "project_key": "blog"}),
        ("user-manual", 60, {}),
        ("user-auto", 60, {"source": "AUTO"}),
    ])
    outcome = extract([{"type": "user", "content": "新的用户事实"},
                       {"type": "project", "content": "新的项目事实"}])
    assert counts(outcome) == (2, 0, 0, 0, 2)
    assert memories.get(rows["user-auto"][0])["status"] == "DISMISSED"
    assert memories.get(rows["mao-auto"][0])["status"] == "DISMISSED"
    assert memories.get(rows["blog-auto"][0])["status"] == "ACTIVE"
    assert memories.count(USER_ID, status="DISMISSED") == 2


def test_all_manual_group_drops_insert(extract, memories):
    rows = fill(memories, [("mao-auto", 10, {"source": "AUTO", "scope": "PROJECT",
                                             "project_key": "mao"}),
                           ("user-manual", 190, {})])
    outcome = extract([{"type": "user", "content": "新的用户事实"}])
    assert outcome["status"] == "succeeded" and counts(outcome) == (0, 0, 0, 1, 0)
    assert memories.count(USER_ID, status="DISMISSED") == 0
    assert all(memories.get(i)["status"] == "ACTIVE" for i in rows["mao-auto"])
    assert memories.count(USER_ID, content="新的用户事实") == 0


def test_at_most_one_demotion_per_insert(extract, memories):
    rows = fill(memories, [("auto", 200, {"source": "AUTO"})])
    outcome = extract([{"type": "user", "content": f"新事实{i}"} for i in range(3)])
    assert counts(outcome) == (3, 0, 0, 0, 3)
    assert [memories.get(i)["status"] for i in rows["auto"][:4]] == \
        ["DISMISSED", "DISMISSED", "DISMISSED", "ACTIVE"]
    assert memories.count(USER_ID, status="ACTIVE") == 200


def test_a_run_never_demotes_what_it_has_just_written(extract, memories):
    fill(memories, [("auto", 1, {"source": "AUTO"}), ("manual", 199, {})])
    outcome = extract([{"type": "user", "content": "第一条新事实"},
                       {"type": "user", "content": "第二条新事实"}])
    assert counts(outcome) == (1, 0, 0, 1, 1)
    assert memories.count(USER_ID, status="ACTIVE", content="第一条新事实") == 1
    assert memories.count(USER_ID, status="ACTIVE") == 200


def test_touch_and_update_need_no_room_at_a_full_pool(extract, memories):
    rows = fill(memories, [("auto", 200, {"source": "AUTO"})])
    outcome = extract([{"type": "user", "action": "touch", "existingId": rows["auto"][5]},
                       {"type": "user", "action": "update", "existingId": rows["auto"][6],
                        "content": "更完整的表述"}])
    assert counts(outcome) == (0, 1, 1, 0, 0)
    assert memories.count(USER_ID, status="ACTIVE") == 200


def test_known_words_at_a_full_pool_are_reconfirmed_and_demote_nothing(extract, memories):
    rows = fill(memories, [("auto", 200, {"source": "AUTO"})])
    known = memories.get(rows["auto"][7])
    outcome = extract([{"type": "user", "content": known["content"]}])
    assert counts(outcome) == (0, 1, 0, 0, 0)
    assert memories.get(known["id"])["rawUpdatedAt"] > known["rawUpdatedAt"]
    assert memories.count(USER_ID, status="DISMISSED") == 0


def test_dismissed_words_at_a_full_pool_are_dropped_and_demote_nothing(extract, memories):
    rows = fill(memories, [("gone", 1, {"source": "AUTO", "status": "DISMISSED"}),
                           ("auto", 200, {"source": "AUTO"})])
    outcome = extract([{"type": "user", "content": memories.get(rows["gone"][0])["content"]}])
    assert counts(outcome) == (0, 0, 0, 1, 0)
    assert memories.count(USER_ID, status="DISMISSED") == 1
    assert memories.count(USER_ID, status="ACTIVE") == 200


def test_a_pool_seen_full_but_no_longer_full_under_the_lock_demotes_nothing(app, memories):
    """The job saw the pool full before the model answered; the user deleted a row meanwhile:
    the insert takes the free slot, whatever was looked up for a demotion."""
    from app.memory.events import Actor
    from app.memory.memories import Action, Fact, UserMemories
    from app.memory.rules import USER_GROUP
    from app.unit_of_work import UnitOfWork

    fill(memories, [("auto", 199, {"source": "AUTO"})])
    with app.app_context(), UnitOfWork() as uow:
        learned = UserMemories(uow, USER_ID, Actor.EXTRACTION, 77).learn(
            [Fact(Action.INSERT, USER_GROUP, "空出一格后学到的事实")], {}, pool_full=True)
        uow.commit()
    assert (learned.inserted, learned.demoted) == (1, 0)
    assert memories.count(USER_ID, status="ACTIVE") == 200
    assert memories.count(USER_ID, status="DISMISSED") == 0


def test_demoted_row_can_be_restored(extract, memories, as_service):
    rows = fill(memories, [("auto", 200, {"source": "AUTO"})])
    extract([{"type": "user", "content": "新事实"}])
    demoted = rows["auto"][0]
    assert memories.get(demoted)["status"] == "DISMISSED"
    user = as_service(USER_ID)
    # Restoring is the user's explicit act and counts against the cap like a manual write.
    assert_error(user.patch(f"/api/v1/memory/{demoted}", {"status": "ACTIVE"}), 409, 3036)
    assert_error(user.post("/api/v1/memory", {"scope": "USER", "content": "手写"}), 409, 3036)
    assert user.delete(f"/api/v1/memory/{rows['auto'][1]}")[0] == 200
    restored = assert_ok(user.patch(f"/api/v1/memory/{demoted}", {"status": "ACTIVE"}))
    assert (restored["status"], restored["source"]) == ("ACTIVE", "AUTO")


# ---- concurrency -------------------------------------------------------------------------

def test_active_cap_holds_under_concurrent_jobs(app, llm, memories):
    """Eight jobs of one user, eight sessions, at once: the user row lock keeps 200 exact."""
    capture_on(app)
    fill(memories, [("manual", 100, {}), ("auto", 98, {"source": "AUTO"})])
    for i in range(8):
        llm.reply_items([{"type": "user", "content": f"并发学到的事实{i}"}], delay=0.2)
    barrier = threading.Barrier(8)
    errors: list[BaseException] = []

    def job(i: int) -> None:
        body = event(sessionId=1000 + i)
        payload = {"event_id": body["eventId"], "user_id": USER_ID, "session_id": 1000 + i,
                   "project_key": "mao", "user_message": body["lastUserMessage"],
                   "assistant_message": body["lastAssistantMessage"]}
        try:
            with app.app_context():
                barrier.wait()
                run_extraction(payload, 1, f"concurrent-{i}")
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=job, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    with app.app_context():
        totals = db.session.execute(sa.select(sa.func.sum(JobOutcome.inserted),
                                              sa.func.sum(JobOutcome.demoted))).one()
    assert tuple(totals) == (8, 6)
    assert memories.count(USER_ID, status="ACTIVE") == 200
    assert memories.count(USER_ID, status="ACTIVE", source="MANUAL") == 100


def test_duplicate_key_race_becomes_the_hit_branch(app, extract, memories):
    """A concurrent writer (outside the user lock) commits the same content while the job's
    INSERT waits on it: the job touches that row instead of failing."""
    from app.memory import rules

    fact = "输出报告用中文"
    engine = sa.create_engine(TEST_DATABASE_URL, isolation_level="READ COMMITTED")
    holder = engine.connect()
    transaction = holder.begin()
    now = utcnow()
    holder.execute(sa.insert(MemoryItem).values(
        user_id=USER_ID, scope="USER", project_key="", content=fact, source="MANUAL",
        status="ACTIVE", dedup_hash=rules.dedup_hash("USER", "", fact), created_at=now,
        updated_at=now))

    waited: list[bool] = []

    def commit_when_the_job_waits() -> None:
        try:
            waited.append(wait_for_blocked(engine))
        finally:
            transaction.commit()

    committer = threading.Thread(target=commit_when_the_job_waits)
    committer.start()
    try:
        outcome = extract([{"type": "user", "content": fact}])
    finally:
        committer.join(timeout=30)
        holder.close()
        engine.dispose()
    assert waited == [True]
    assert (outcome["status"], counts(outcome)) == ("succeeded", (0, 1, 0, 0, 0))
    assert memories.count(USER_ID, content=fact) == 1
