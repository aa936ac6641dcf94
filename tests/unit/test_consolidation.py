"""Consolidation's writes through `UserMemories.consolidate` (D15): a checked plan for one group,
applied to its machine-made ACTIVE rows under the user lock, all or nothing."""

from __future__ import annotations

from datetime import timedelta

import pytest

from app.memory.events import Actor, Changed, Deleted, EventType
from app.memory.memories import GroupChanged, Merge, Plan, UserMemories
from app.memory.rules import Group, Source, Status
from tests.unit.fakes import EPOCH, USER_ID, FakeUnitOfWork

PROJECT = Group("mao")


@pytest.fixture
def rows(repo):
    """Three machine rows of the project group (the first the oldest) and a MANUAL one."""
    return [repo.seed(USER_ID, PROJECT, "uses pnpm", age=30),
            repo.seed(USER_ID, PROJECT, "pnpm is the package manager", age=20,
                      source=Source.CONSOLIDATED),
            repo.seed(USER_ID, PROJECT, "ci runs on linux", age=10),
            repo.seed(USER_ID, PROJECT, "deploys on fridays", source=Source.MANUAL)]


def seen(*rows):
    """What the model was shown: each row's id and version."""
    return {row.id: row.version for row in rows}


def consolidate(memories, plan, shown, group=PROJECT):
    return memories(Actor.CONSOLIDATION).consolidate(group, plan, shown)


def test_a_merge_replaces_its_sources_with_one_consolidated_row(memories, repo, uow, rows):
    pnpm, manager, ci, _ = rows
    plan = Plan(merges=[Merge((pnpm.id, manager.id), "uses pnpm as its package manager")],
                keeps=[ci.id])

    done = consolidate(memories, plan, seen(pnpm, manager, ci))

    assert repo.row(pnpm.id) is None and repo.row(manager.id) is None
    (merged,) = [r for r in repo.rows.values() if r.source == Source.CONSOLIDATED]
    assert (merged.content, merged.status, merged.origin_session_id) == (
        "uses pnpm as its package manager", Status.ACTIVE, None)
    # The history of its sources: created as the oldest, last confirmed as the newest.
    assert (merged.created_at, merged.updated_at) == (EPOCH - timedelta(minutes=30),
                                                      EPOCH - timedelta(minutes=20))
    assert (done.inserted, done.merges, done.drops, done.refused, done.rows_out) == (1, 1, 0, 0, 2)
    assert uow.events == [
        Deleted(USER_ID, (pnpm.id, manager.id)),
        Changed(USER_ID, merged.id, EventType.CONSOLIDATED, Actor.CONSOLIDATION, None,
                merged.updated_at, ["uses pnpm", "pnpm is the package manager"],
                "uses pnpm as its package manager")]


def test_a_drop_deletes_the_row_and_a_keep_leaves_it(memories, repo, uow, rows):
    pnpm, manager, ci, _ = rows

    done = consolidate(memories, Plan(keeps=[pnpm.id, manager.id], drops=[ci.id]),
                       seen(pnpm, manager, ci))

    assert repo.row(ci.id) is None
    assert (repo.row(pnpm.id), repo.row(manager.id)) == (pnpm, manager)
    assert (pnpm.updated_at, manager.updated_at) == (EPOCH - timedelta(minutes=30),
                                                     EPOCH - timedelta(minutes=20))
    assert (done.drops, done.rows_out) == (1, 2)
    assert uow.events == [Deleted(USER_ID, (ci.id,))]


def test_consolidation_takes_the_user_lock_first(memories, repo, rows):
    consolidate(memories, Plan(keeps=[rows[0].id]), seen(rows[0]))

    assert repo.calls[0] == "lock_user"


def _edited(repo, row):
    row.content, row.dedup_hash = "edited", PROJECT.dedup_hash("edited")
    row.version += 1


def _edited_and_back(repo, row):
    """Two edits that end on the first words: the same hash, another version."""
    row.version += 2


@pytest.mark.parametrize("change", [
    _edited,
    _edited_and_back,
    lambda repo, row: setattr(row, "status", Status.DISMISSED.value),
    lambda repo, row: repo.rows.pop(row.id),
], ids=["edited", "edited and back", "dismissed or demoted", "deleted"])
def test_a_plan_naming_a_row_changed_since_the_model_saw_it_is_not_applied_at_all(
        memories, repo, uow, rows, change):
    pnpm, manager, ci, _ = rows
    plan = Plan(merges=[Merge((pnpm.id, manager.id), "uses pnpm as its package manager")],
                drops=[ci.id])
    shown = seen(pnpm, manager, ci)
    change(repo, ci)
    before = repo.snapshot()

    with pytest.raises(GroupChanged) as voided:
        consolidate(memories, plan, shown)
    assert voided.value.reason == "inputs_changed"
    assert repo.snapshot() == before
    assert uow.events == []


def test_a_manual_row_is_never_merged_or_dropped(memories, repo, uow, rows):
    manual = rows[3]
    before = repo.snapshot()

    with pytest.raises(GroupChanged):
        consolidate(memories, Plan(drops=[manual.id]), seen(manual))
    assert repo.snapshot() == before


def test_a_merge_into_dismissed_words_is_refused_and_its_sources_kept(memories, repo, uow,
                                                                      rows):
    pnpm, manager, ci, _ = rows
    repo.seed(USER_ID, PROJECT, "uses pnpm everywhere", status=Status.DISMISSED)
    plan = Plan(merges=[Merge((pnpm.id, manager.id), "uses pnpm everywhere")], drops=[ci.id])

    done = consolidate(memories, plan, seen(pnpm, manager, ci))

    assert (repo.row(pnpm.id), repo.row(manager.id), repo.row(ci.id)) == (pnpm, manager, None)
    assert (done.refused, done.merges, done.inserted, done.drops) == (1, 0, 0, 1)
    assert [r.content for r in repo.rows.values() if r.status == Status.DISMISSED] == \
        ["uses pnpm everywhere"]  # not resurrected
    assert uow.events == [Deleted(USER_ID, (ci.id,))]


def test_a_merge_into_words_an_older_machine_row_has_moves_that_row(memories, repo, uow, rows):
    pnpm, manager, *_ = rows
    older = repo.seed(USER_ID, PROJECT, "uses pnpm 9", age=60)

    done = consolidate(memories, Plan(merges=[Merge((pnpm.id, manager.id), "uses pnpm 9")]),
                       seen(pnpm, manager))

    assert older.updated_at == manager.updated_at  # the newest source's
    assert (done.inserted, done.touched, done.rows_out) == (0, 1, 0)
    assert [e.type for e in uow.events if isinstance(e, Changed)] == [EventType.TOUCHED]


def test_a_merge_into_words_of_a_manual_row_leaves_the_manual_row_as_it_is(memories, repo, uow,
                                                                            rows):
    pnpm, manager, *_ = rows
    manual = repo.seed(USER_ID, PROJECT, "uses pnpm 9", source=Source.MANUAL, age=60)

    done = consolidate(memories, Plan(merges=[Merge((pnpm.id, manager.id), "uses pnpm 9")]),
                       seen(pnpm, manager))

    assert (manual.source, manual.updated_at) == (Source.MANUAL, EPOCH - timedelta(minutes=60))
    assert (repo.row(pnpm.id), repo.row(manager.id)) == (None, None)
    assert (done.inserted, done.touched) == (0, 0)


def test_a_merge_racing_a_writer_rolls_the_whole_group_back(repo, rows):
    pnpm, manager, ci, _ = rows
    plan = Plan(merges=[Merge((pnpm.id, manager.id), "uses pnpm 9")], drops=[ci.id])
    # Another writer says the merged words after the sources were deleted.
    repo.meanwhile(lambda: repo.seed(USER_ID, PROJECT, "uses pnpm 9", source=Source.MANUAL),
                   before="insert")

    with pytest.raises(GroupChanged) as voided:
        with FakeUnitOfWork(repo) as uow:
            UserMemories(uow, USER_ID, Actor.CONSOLIDATION, repository=repo).consolidate(
                PROJECT, plan, seen(pnpm, manager, ci))
            uow.commit()
    assert voided.value.reason == "concurrent_write"
    assert "delete" in repo.calls  # half of the plan had been written
    back = [repo.row(row.id) for row in (pnpm, manager, ci)]
    assert [(r.content, r.source, r.status) for r in back] == [
        ("uses pnpm", Source.AUTO, Status.ACTIVE),
        ("pnpm is the package manager", Source.CONSOLIDATED, Status.ACTIVE),
        ("ci runs on linux", Source.AUTO, Status.ACTIVE)]
    assert not uow.committed and uow.events == []
