"""A memory's history as its owner reads it, for the user's own changes (SPEC §8 Provenance)."""

from __future__ import annotations

import sqlalchemy as sa

from app.extensions import db
from app.memory.models import MemoryEvent
from tests.conftest import assert_error, assert_ok

URL = "/api/v1/memory"


def create(api, content: str = "输出报告用中文") -> int:
    return assert_ok(api.post(URL, {"scope": "USER", "content": content}), 201)["id"]


def history(api, item_id: int) -> list[dict]:
    return assert_ok(api.get(f"{URL}/{item_id}/history"))


def told(events: list[dict]) -> list[tuple]:
    return [(e["type"], e["actor"], e["sessionId"], e["before"], e["after"]) for e in events]


def test_a_manual_memory_starts_with_one_created_event_by_the_user(alice):
    item_id = create(alice)
    (event,) = history(alice, item_id)
    assert set(event) == {"id", "type", "at", "actor", "sessionId", "before", "after"}
    assert told([event]) == [("CREATED", "USER", None, None, "输出报告用中文")]
    assert event["at"].endswith("Z")


def test_an_edit_is_journaled_with_the_words_before_and_after(alice):
    item_id = create(alice)
    assert_ok(alice.patch(f"{URL}/{item_id}", {"content": "输出报告一律用中文"}))
    assert told(history(alice, item_id))[1:] == [
        ("EDITED", "USER", None, "输出报告用中文", "输出报告一律用中文")]


def test_an_edit_that_changes_no_word_adds_no_event(alice):
    item_id = create(alice)
    assert_ok(alice.patch(f"{URL}/{item_id}", {"content": "  输出报告用中文 "}))
    assert [e["type"] for e in history(alice, item_id)] == ["CREATED"]


def test_dismiss_and_restore_are_journaled_oldest_first(alice):
    item_id = create(alice)
    assert_ok(alice.patch(f"{URL}/{item_id}", {"status": "DISMISSED"}))
    assert_ok(alice.patch(f"{URL}/{item_id}", {"status": "ACTIVE"}))
    events = history(alice, item_id)
    assert told(events) == [("CREATED", "USER", None, None, "输出报告用中文"),
                            ("DISMISSED", "USER", None, None, None),
                            ("RESTORED", "USER", None, None, None)]
    assert [e["id"] for e in events] == sorted(e["id"] for e in events)


def test_another_users_history_is_404(alice, bob):
    item_id = create(alice)
    assert_error(bob.get(f"{URL}/{item_id}/history"), 404, 3033)


def test_a_missing_memory_has_no_history(alice):
    assert_error(alice.get(f"{URL}/987654321/history"), 404, 3033)
    assert_error(alice.get(f"{URL}/{2**63}/history"), 404, 3033)


def test_a_deleted_memory_takes_its_events_with_it(app, alice):
    item_id = create(alice)
    assert_ok(alice.patch(f"{URL}/{item_id}", {"content": "改过一次"}))
    assert_ok(alice.delete(f"{URL}/{item_id}"))
    assert_error(alice.get(f"{URL}/{item_id}/history"), 404, 3033)
    with app.app_context():
        left = db.session.scalar(sa.select(sa.func.count()).select_from(MemoryEvent)
                                 .where(MemoryEvent.memory_id == item_id))
        db.session.remove()
    assert left == 0


def test_a_memory_from_before_the_journal_has_an_empty_history(alice, memories):
    assert history(alice, memories.add(alice.user_id, "很早以前的记忆")) == []
