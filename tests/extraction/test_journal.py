"""What extraction and consolidation leave in the journal (SPEC §8 Provenance): every change, in
the job's transaction, with the session that caused it; a merged row's lineage; deleted rows'
events gone."""

from __future__ import annotations

import pymysql
import sqlalchemy as sa

from app.db_types import utcnow
from app.extensions import db
from app.memory.models import MemoryEvent
from tests.completions import SESSION_ID, USER_ID, memory_rows

EARLIER = utcnow().replace(year=2025)


def journal(app, memory_id: int | None = None) -> list[tuple]:
    """(memory, type, actor, session, before, after) of the journal, oldest first."""
    with app.app_context():
        query = sa.select(MemoryEvent).order_by(MemoryEvent.id)
        if memory_id is not None:
            query = query.where(MemoryEvent.memory_id == memory_id)
        rows = [(e.memory_id, e.type, e.actor, e.session_id, e.before, e.after)
                for e in db.session.scalars(query)]
        db.session.remove()
        return rows


def test_an_extraction_journals_what_it_learnt_with_its_session(app, extract, memories):
    confirmed = memories.add(USER_ID, "部署前先跑测试", source="AUTO")
    reworded = memories.add(USER_ID, "报告用中文", source="AUTO")
    outcome = extract([{"type": "user", "content": "仓库统一用 pnpm"},
                       {"type": "user", "action": "touch", "existingId": confirmed},
                       {"type": "user", "action": "update", "existingId": reworded,
                        "content": "所有报告都用中文写"}])
    assert (outcome["inserted"], outcome["touched"], outcome["updated"]) == (1, 1, 1)
    (learnt,) = [i for i, row in memory_rows(app).items() if row["content"] == "仓库统一用 pnpm"]
    assert journal(app) == [
        (learnt, "CREATED", "EXTRACTION", SESSION_ID, None, "仓库统一用 pnpm"),
        (confirmed, "TOUCHED", "EXTRACTION", SESSION_ID, None, None),
        (reworded, "UPDATED", "EXTRACTION", SESSION_ID, "报告用中文", "所有报告都用中文写"),
    ]


def test_a_re_confirmation_by_the_same_words_is_a_touch(app, extract, memories):
    known = memories.add(USER_ID, "仓库统一用 pnpm", source="MANUAL")
    extract([{"type": "user", "content": "仓库统一用 pnpm"}])
    assert journal(app, known) == [(known, "TOUCHED", "EXTRACTION", SESSION_ID, None, None)]


def test_nothing_is_journaled_for_what_was_dropped(app, extract, memories):
    dismissed = memories.add(USER_ID, "仓库统一用 pnpm", source="AUTO", status="DISMISSED")
    outcome = extract([{"type": "user", "content": "仓库统一用 pnpm"}])
    assert outcome["dropped"] == 1
    assert journal(app, dismissed) == []


def test_a_d14_demotion_is_journaled(app, extract, memories):
    oldest, *_ = memories.bulk(USER_ID, [f"自动行{i:03d}" for i in range(200)], source="AUTO",
                               updated_at=EARLIER)
    outcome = extract([{"type": "user", "content": "池满时学到的新事实"}])
    assert (outcome["inserted"], outcome["demoted"]) == (1, 1)
    assert journal(app, oldest) == [(oldest, "DEMOTED", "EXTRACTION", SESSION_ID, None, None)]


def test_a_merged_row_has_one_consolidated_event_listing_the_merged_contents(
        app, consolidate, memories):
    a, b, c = memories.bulk(USER_ID, ["报告用中文", "总结用中文", "仓库用 pnpm"], source="AUTO",
                            updated_at=EARLIER)
    outcome = consolidate([{"op": "merge", "sourceIds": [a, b], "content": "报告和总结都用中文"},
                           {"op": "keep", "sourceIds": [c]}])
    assert (outcome["status"], outcome["merges"]) == ("succeeded", 1)
    (merged,) = [i for i, row in memory_rows(app).items() if row["source"] == "CONSOLIDATED"]
    assert journal(app) == [(merged, "CONSOLIDATED", "CONSOLIDATION", None,
                             '["报告用中文", "总结用中文"]', "报告和总结都用中文")]


def test_the_history_shows_a_merged_rows_lineage_as_a_list(app, consolidate, memories,
                                                          as_user, users):
    a, b = memories.bulk(USER_ID, ["报告用中文", "总结用中文"], source="AUTO", updated_at=EARLIER)
    consolidate([{"op": "merge", "sourceIds": [a, b], "content": "报告和总结都用中文"}])
    (merged,) = memory_rows(app)
    users.user("owner", user_id=USER_ID)
    owner = as_user(users.token("owner"))
    (event,) = owner.get(f"/api/v1/memory/{merged}/history")[1]["data"]
    assert (event["type"], event["before"]) == ("CONSOLIDATED", ["报告用中文", "总结用中文"])


def test_merged_and_dropped_rows_take_their_events_with_them(app, consolidate, memories):
    a, b, c, d = memories.bulk(USER_ID, ["报告用中文", "总结用中文", "重复的一条", "留下的一条"],
                               source="AUTO", updated_at=EARLIER)
    with app.app_context():
        db.session.execute(sa.insert(MemoryEvent), [
            {"memory_id": i, "user_id": USER_ID, "type": "CREATED", "actor": "EXTRACTION",
             "session_id": 55, "before": None, "after": "…", "at": EARLIER}
            for i in (a, b, c, d)])
        db.session.commit()
        db.session.remove()
    consolidate([{"op": "merge", "sourceIds": [a, b], "content": "报告和总结都用中文"},
                 {"op": "drop", "sourceIds": [c]}, {"op": "keep", "sourceIds": [d]}])
    assert {row[0] for row in journal(app)} - {d} == set(memory_rows(app)) - {d}
    assert all(row[0] not in (a, b, c) for row in journal(app))


def test_a_jobs_journal_and_outcome_go_in_one_round_trip(app, extract, memories, monkeypatch):
    """CREATED carries `after`, TOUCHED nothing, UPDATED both: one query to the server still
    carries all three rows and the job's outcome (watched at the driver, which really sends)."""
    confirmed = memories.add(USER_ID, "部署前先跑测试", source="AUTO")
    reworded = memories.add(USER_ID, "报告用中文", source="AUTO")
    sent: list[str] = []
    query = pymysql.connections.Connection.query

    def watched(connection, sql, unbuffered=False):
        sent.append(sql if isinstance(sql, str) else sql.decode())
        return query(connection, sql, unbuffered)

    monkeypatch.setattr(pymysql.connections.Connection, "query", watched)
    extract([{"type": "user", "content": "仓库统一用 pnpm"},
             {"type": "user", "action": "touch", "existingId": confirmed},
             {"type": "user", "action": "update", "existingId": reworded,
              "content": "所有报告都用中文写"}])
    monkeypatch.undo()
    assert len(journal(app)) == 3
    journaling = [sql for sql in sent if "INSERT INTO memory_event" in sql]
    assert len(journaling) == 1
    assert journaling[0].count("INSERT INTO memory_event") == 3
    assert "INSERT INTO memory_job_outcome" in journaling[0]
