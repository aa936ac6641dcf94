"""The user's own changes through `UserMemories` (create, edit, delete): D4, D7, D12, D3."""

from __future__ import annotations

import pytest

from app.errors import DuplicateContent, LimitReached, MemoryNotFound, VersionConflict
from app.memory.events import Actor, Changed, Deleted, EventType
from app.memory.rules import ACTIVE_PER_USER_MAX, USER_GROUP, Group, Source, Status
from tests.unit.fakes import OTHER_USER_ID, USER_ID

PROJECT = Group("mao")


def test_create_writes_an_active_manual_row_and_records_it(memories, repo, uow):
    item = memories().create(PROJECT, "uses pnpm")

    row = repo.row(item.id)
    assert (row.user_id, row.scope, row.project_key) == (USER_ID, "PROJECT", "mao")
    assert (row.source, row.status) == (Source.MANUAL, Status.ACTIVE)
    assert row.dedup_hash == PROJECT.dedup_hash("uses pnpm")
    assert uow.events == [Changed(USER_ID, item.id, EventType.CREATED, Actor.USER, None,
                                  row.created_at, None, "uses pnpm")]


def test_create_counts_only_under_the_user_lock(memories, repo):
    memories().create(USER_GROUP, "likes tea")

    assert repo.calls.index("lock_user") < repo.calls.index("count_active")


def test_create_refuses_words_the_user_has_already_even_dismissed(memories, repo, uow):
    repo.seed(USER_ID, USER_GROUP, "likes  tea", status=Status.DISMISSED)

    with pytest.raises(DuplicateContent):
        memories().create(USER_GROUP, "likes tea")  # the same words once normalized
    assert uow.events == []


def test_the_same_words_in_another_group_or_of_another_user_are_not_a_duplicate(memories,
                                                                                 repo):
    repo.seed(USER_ID, USER_GROUP, "likes tea")
    repo.seed(OTHER_USER_ID, PROJECT, "likes tea")

    memories().create(PROJECT, "likes tea")

    assert len(repo.active(USER_ID)) == 2


def test_a_create_racing_the_same_words_is_a_duplicate(memories, repo, uow):
    repo.meanwhile(lambda: repo.seed(USER_ID, USER_GROUP, "likes tea"))

    with pytest.raises(DuplicateContent):
        memories().create(USER_GROUP, "likes tea")
    assert uow.events == []


def test_a_create_beyond_200_active_memories_is_refused(memories, repo, uow):
    repo.fill(USER_ID, USER_GROUP, ACTIVE_PER_USER_MAX - 1)
    repo.seed(USER_ID, USER_GROUP, "dismissed, so not counted", status=Status.DISMISSED)
    memories().create(USER_GROUP, "the 200th")

    with pytest.raises(LimitReached) as refused:
        memories().create(USER_GROUP, "the 201st")
    assert refused.value.reason == "active_limit"
    assert len(repo.active(USER_ID)) == ACTIVE_PER_USER_MAX


def test_an_edit_keeps_the_status(memories, repo, uow):
    row = repo.seed(USER_ID, USER_GROUP, "likes tea", status=Status.DISMISSED)

    memories().edit(row.id, content="likes green tea")

    assert (row.content, row.status) == ("likes green tea", Status.DISMISSED)
    assert row.dedup_hash == USER_GROUP.dedup_hash("likes green tea")
    assert [(e.type, e.before, e.after) for e in uow.events] == [
        (EventType.EDITED, "likes tea", "likes green tea")]


def test_an_edit_to_words_another_memory_has_is_refused(memories, repo, uow):
    repo.seed(USER_ID, USER_GROUP, "likes coffee", status=Status.DISMISSED)
    row = repo.seed(USER_ID, USER_GROUP, "likes tea")

    with pytest.raises(DuplicateContent):
        memories().edit(row.id, content="likes coffee")
    assert row.content == "likes tea"
    assert uow.events == []


def test_an_edit_to_the_same_words_records_nothing(memories, repo, uow):
    row = repo.seed(USER_ID, USER_GROUP, "likes tea")

    memories().edit(row.id, content="likes tea")

    assert uow.events == []


def test_dismissing_and_restoring_are_recorded(memories, repo, uow):
    row = repo.seed(USER_ID, USER_GROUP, "likes tea")

    memories().edit(row.id, status=Status.DISMISSED)
    assert row.status == Status.DISMISSED
    memories().edit(row.id, status=Status.ACTIVE)

    assert row.status == Status.ACTIVE
    assert [e.type for e in uow.events] == [EventType.DISMISSED, EventType.RESTORED]


def test_restoring_counts_against_the_200_cap_under_the_lock(memories, repo, uow):
    repo.fill(USER_ID, USER_GROUP, ACTIVE_PER_USER_MAX)
    row = repo.seed(USER_ID, USER_GROUP, "likes tea", status=Status.DISMISSED)

    with pytest.raises(LimitReached):
        memories().edit(row.id, status=Status.ACTIVE)
    assert row.status == Status.DISMISSED
    assert repo.calls.index("lock_user") < repo.calls.index("count_active")


def test_dismissing_at_the_cap_needs_no_room(memories, repo):
    rows = repo.fill(USER_ID, USER_GROUP, ACTIVE_PER_USER_MAX)

    memories().edit(rows[0].id, status=Status.DISMISSED)

    assert "lock_user" not in repo.calls
    assert "count_active" not in repo.calls


def test_an_edit_from_the_rows_version_applies_and_raises_it(memories, repo):
    row = repo.seed(USER_ID, USER_GROUP, "likes tea")

    memories().edit(row.id, content="likes green tea", expected_versions={1})

    assert (row.content, row.version) == ("likes green tea", 2)


@pytest.mark.parametrize("change", [{"content": "likes green tea"},
                                    {"status": Status.DISMISSED}])
def test_a_change_from_another_version_changes_nothing_and_shows_the_row_as_it_is(
        memories, repo, uow, change):
    row = repo.seed(USER_ID, USER_GROUP, "likes tea")
    memories().edit(row.id, content="likes black tea")

    with pytest.raises(VersionConflict) as refused:
        memories().edit(row.id, expected_versions={1}, **change)
    assert (row.content, row.status, row.version) == ("likes black tea", Status.ACTIVE, 2)
    assert [e.type for e in uow.events] == [EventType.EDITED]
    now = refused.value.current
    assert now is not row  # a copy: the rollback that follows leaves it as read
    assert (now.id, now.content, now.version) == (row.id, "likes black tea", 2)
    assert refused.value.reason == "version_conflict"


def test_a_delete_from_another_version_keeps_the_row(memories, repo, uow):
    row = repo.seed(USER_ID, USER_GROUP, "likes tea")
    memories().edit(row.id, status=Status.DISMISSED)

    with pytest.raises(VersionConflict):
        memories().delete(row.id, expected_versions={1})
    assert repo.row(row.id) is row
    memories().delete(row.id, expected_versions={2})
    assert repo.row(row.id) is None


def test_a_delete_is_physical_and_recorded(memories, repo, uow):
    row = repo.seed(USER_ID, USER_GROUP, "likes tea")

    memories().delete(row.id)

    assert repo.row(row.id) is None
    assert uow.events == [Deleted(USER_ID, (row.id,))]


@pytest.mark.parametrize("change", [
    lambda m, item_id: m.get(item_id),
    lambda m, item_id: m.edit(item_id, content="mine now"),
    lambda m, item_id: m.edit(item_id, status=Status.DISMISSED),
    lambda m, item_id: m.delete(item_id),
], ids=["get", "edit", "dismiss", "delete"])
def test_another_users_memory_is_not_found(memories, repo, uow, change):
    theirs = repo.seed(OTHER_USER_ID, USER_GROUP, "likes tea")

    with pytest.raises(MemoryNotFound):
        change(memories(), theirs.id)
    assert (theirs.content, theirs.status) == ("likes tea", Status.ACTIVE)
    assert uow.events == []
