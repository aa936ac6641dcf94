"""Extraction's writes through `UserMemories.learn`: D3 (a dismissed wording is never
resurrected), D13 (insert / touch / update, only of the machine rows the model was shown) and
D14 (a full pool demotes the stalest machine row of the fact's group)."""

from __future__ import annotations

import pytest

from app.memory.events import Actor, EventType
from app.memory.memories import Action, Fact
from app.memory.rules import (
    ACTIVE_PER_USER_MAX,
    EXTRACT_MAX_ITEMS,
    USER_GROUP,
    Group,
    Source,
    Status,
)
from tests.unit.fakes import EPOCH, SESSION_ID, USER_ID

PROJECT = Group("mao")


def insert(content, group=USER_GROUP):
    return Fact(Action.INSERT, group, content)


def touch(row, group=USER_GROUP):
    return Fact(Action.TOUCH, group, None, row.id)


def update(row, content, group=USER_GROUP):
    return Fact(Action.UPDATE, group, content, row.id)


def shown(*rows, group=USER_GROUP):
    """The references of a comparison set holding `rows` (what the model was shown): each id
    with the version it had then."""
    return {group: {row.id: row.version for row in rows}}


def learn(memories, facts, references=None, **options):
    return memories(Actor.EXTRACTION).learn(facts, references or {}, **options)


def kinds(uow):
    return [event.type for event in uow.events]


# ---- insert and the exact-hash pre-check -----------------------------------------------------

def test_a_new_fact_becomes_an_auto_row_of_the_session(memories, repo, uow):
    learned = learn(memories, [insert("uses pnpm", PROJECT)])

    (row,) = repo.active(USER_ID)
    assert (row.content, row.source, row.origin_session_id) == ("uses pnpm", Source.AUTO,
                                                                SESSION_ID)
    assert (row.scope, row.project_key) == ("PROJECT", "mao")
    assert (learned.inserted, learned.written_groups, learned.active) == (1, {PROJECT}, 1)
    (event,) = uow.events
    assert (event.type, event.actor, event.session_id, event.after) == (
        EventType.CREATED, Actor.EXTRACTION, SESSION_ID, "uses pnpm")


def test_learning_counts_under_the_user_lock(memories, repo):
    learn(memories, [insert("uses pnpm")])

    assert repo.calls[0] == "lock_and_count"


def test_a_dismissed_wording_is_not_resurrected(memories, repo, uow):
    dismissed = repo.seed(USER_ID, USER_GROUP, "uses  npm", status=Status.DISMISSED)

    learned = learn(memories, [insert("uses npm")])

    assert (dismissed.status, dismissed.updated_at) == (Status.DISMISSED, EPOCH)
    assert (learned.inserted, learned.dropped) == (0, 1)
    assert repo.active(USER_ID) == []
    assert uow.events == []


def test_words_an_active_row_has_are_reconfirmed_not_duplicated(memories, repo, uow):
    known = repo.seed(USER_ID, USER_GROUP, "uses pnpm")

    learned = learn(memories, [insert("uses pnpm")])

    assert len(repo.active(USER_ID)) == 1
    assert known.updated_at > EPOCH
    assert (learned.inserted, learned.touched) == (0, 1)
    assert kinds(uow) == [EventType.TOUCHED]


def test_deleted_words_may_be_learnt_again(memories, repo, uow):
    row = repo.seed(USER_ID, USER_GROUP, "uses pnpm")
    memories().delete(row.id)

    learned = learn(memories, [insert("uses pnpm")])

    assert learned.inserted == 1
    assert [r.content for r in repo.active(USER_ID)] == ["uses pnpm"]


def test_a_clash_whose_row_is_gone_again_is_dropped(memories, repo, uow):
    row = repo.seed(USER_ID, USER_GROUP, "uses pnpm")
    read = repo.by_hash

    def deleted_meanwhile(*args, **options):
        # The unique key refused the words; a concurrent delete took their row before the read.
        repo.rows.pop(row.id, None)
        return read(*args, **options)

    repo.by_hash = deleted_meanwhile

    learned = learn(memories, [insert("uses pnpm")])

    assert (learned.inserted, learned.touched, learned.dropped) == (0, 0, 1)
    assert uow.events == []


# ---- touch and update (D13) ------------------------------------------------------------------

def test_a_touch_moves_a_referenced_machine_row(memories, repo, uow):
    row = repo.seed(USER_ID, USER_GROUP, "uses pnpm", source=Source.CONSOLIDATED)

    learned = learn(memories, [touch(row)], shown(row))

    assert row.updated_at > EPOCH
    assert row.content == "uses pnpm"
    assert learned.touched == 1
    assert kinds(uow) == [EventType.TOUCHED]


@pytest.mark.parametrize("fact", [touch, lambda row: update(row, "uses pnpm 9")],
                         ids=["touch", "update"])
def test_a_row_the_model_was_not_shown_is_never_touched_or_rewritten(memories, repo, uow,
                                                                      fact):
    row = repo.seed(USER_ID, USER_GROUP, "uses pnpm")

    learned = learn(memories, [fact(row)], shown())

    assert (row.content, row.updated_at) == ("uses pnpm", EPOCH)
    assert (learned.dropped, learned.inserted) == (1, 0)  # never turned into an insert
    assert len(repo.rows) == 1
    assert uow.events == []


@pytest.mark.parametrize("fact", [touch, lambda row: update(row, "uses pnpm 9")],
                         ids=["touch", "update"])
def test_a_manual_row_is_never_touched_or_rewritten_even_if_named(memories, repo, uow, fact):
    # The comparison set never holds MANUAL rows; the write checks it again all the same.
    row = repo.seed(USER_ID, USER_GROUP, "uses pnpm", source=Source.MANUAL)

    learned = learn(memories, [fact(row)], shown(row))

    assert (row.content, row.updated_at) == ("uses pnpm", EPOCH)
    assert learned.stale == 1
    assert uow.events == []


@pytest.mark.parametrize("fact", [touch, lambda row: update(row, "uses pnpm 9")],
                         ids=["touch", "update"])
def test_a_dismissed_row_is_never_touched_or_rewritten(memories, repo, uow, fact):
    row = repo.seed(USER_ID, USER_GROUP, "uses pnpm", status=Status.DISMISSED)

    learned = learn(memories, [fact(row)], shown(row))

    assert (row.content, row.status, row.updated_at) == ("uses pnpm", Status.DISMISSED, EPOCH)
    assert learned.stale == 1
    assert uow.events == []


def test_a_row_named_under_another_group_is_not_touched(memories, repo, uow):
    row = repo.seed(USER_ID, PROJECT, "uses pnpm")

    learned = learn(memories, [touch(row, USER_GROUP)], shown(row, group=USER_GROUP))

    assert row.updated_at == EPOCH
    assert learned.stale == 1


def _user_edit(repo, row):
    """The user's edit between the job's read and its write, as `UserMemories.edit` makes it."""
    row.content, row.dedup_hash = "uses yarn", USER_GROUP.dedup_hash("uses yarn")
    row.version += 1


@pytest.mark.parametrize("fact", [touch, lambda row: update(row, "uses pnpm 9")],
                         ids=["touch", "update"])
def test_an_action_on_a_row_changed_since_the_model_saw_it_is_stale(memories, repo, uow,
                                                                      fact):
    row = repo.seed(USER_ID, USER_GROUP, "uses pnpm")
    references = shown(row)
    _user_edit(repo, row)

    learned = learn(memories, [fact(row)], references)

    assert (row.content, row.version, row.updated_at) == ("uses yarn", 2, EPOCH)
    assert (learned.stale, learned.touched, learned.updated, learned.dropped) == (1, 0, 0, 0)
    assert uow.events == []


def test_an_update_raises_the_version_and_a_touch_does_not(memories, repo, uow):
    touched = repo.seed(USER_ID, USER_GROUP, "uses pnpm")
    rewritten = repo.seed(USER_ID, USER_GROUP, "likes tea")

    learn(memories, [touch(touched), update(rewritten, "likes green tea")],
          shown(touched, rewritten))

    assert (touched.version, rewritten.version) == (1, 2)


def test_an_update_rewrites_the_machine_row_and_records_both_wordings(memories, repo, uow):
    row = repo.seed(USER_ID, PROJECT, "uses pnpm")

    learned = learn(memories, [update(row, "uses pnpm 9", PROJECT)], shown(row, group=PROJECT))

    assert (row.content, row.dedup_hash) == ("uses pnpm 9", PROJECT.dedup_hash("uses pnpm 9"))
    assert row.source == Source.AUTO and row.status == Status.ACTIVE
    assert (learned.updated, learned.written_groups) == (1, {PROJECT})
    (event,) = uow.events
    assert (event.type, event.before, event.after) == (EventType.UPDATED, "uses pnpm",
                                                       "uses pnpm 9")


@pytest.mark.parametrize("words", ["uses pnpm", "likes tea"], ids=["same", "another row's"])
def test_an_update_to_words_already_said_is_a_touch(memories, repo, uow, words):
    repo.seed(USER_ID, USER_GROUP, "likes tea", source=Source.MANUAL, status=Status.DISMISSED)
    row = repo.seed(USER_ID, USER_GROUP, "uses pnpm")

    learned = learn(memories, [update(row, words)], shown(row))

    assert row.content == "uses pnpm"
    assert row.updated_at > EPOCH
    assert (learned.updated, learned.touched) == (0, 1)
    assert kinds(uow) == [EventType.TOUCHED]


def test_an_update_racing_a_manual_edit_to_the_same_words_is_a_touch(memories, repo, uow):
    row = repo.seed(USER_ID, USER_GROUP, "uses pnpm")
    repo.meanwhile(lambda: repo.seed(USER_ID, USER_GROUP, "uses pnpm 9", source=Source.MANUAL))

    learned = learn(memories, [update(row, "uses pnpm 9")], shown(row))

    assert row.content == "uses pnpm"
    assert (learned.updated, learned.touched) == (0, 1)


# ---- a full pool (D14) -----------------------------------------------------------------------

@pytest.fixture
def full_pool(repo):
    """200 ACTIVE rows: in the USER group, MANUAL rows older than every machine row, and a
    machine row in a project group older still. Returns the USER group's machine rows, the
    stalest first."""
    repo.fill(USER_ID, PROJECT, 1, age=3000)
    repo.fill(USER_ID, USER_GROUP, 99, source=Source.MANUAL, age=1000)
    return repo.fill(USER_ID, USER_GROUP, ACTIVE_PER_USER_MAX - 100)


@pytest.mark.parametrize("pool_full", [False, True], ids=["found full", "expected full"])
def test_a_full_pool_demotes_the_stalest_machine_row_of_the_group(memories, repo, uow,
                                                                  full_pool, pool_full):
    stalest = full_pool[0]

    learned = learn(memories, [insert("uses pnpm")], pool_full=pool_full)

    assert stalest.status == Status.DISMISSED and stalest.updated_at > EPOCH
    assert [r.status for r in repo.rows.values() if r.source == Source.MANUAL] == \
        [Status.ACTIVE] * 99
    assert (learned.inserted, learned.demoted, learned.active) == (1, 1, ACTIVE_PER_USER_MAX)
    assert kinds(uow) == [EventType.CREATED, EventType.DEMOTED]
    # Expected full: where the room comes from is read with the lock, in its round trip.
    assert ("wording_and_stalest" in repo.calls) is not pool_full


def test_a_full_pool_with_no_machine_row_in_the_group_drops_the_fact(memories, repo, uow,
                                                                      full_pool):
    before = repo.snapshot()

    learned = learn(memories, [insert("uses pnpm", Group("elsewhere"))])

    assert (learned.inserted, learned.demoted, learned.dropped) == (0, 0, 1)
    assert repo.snapshot() == before  # no other group's row is demoted for it
    assert uow.events == []


def test_a_full_pool_never_demotes_a_row_the_run_just_confirmed(memories, repo, uow, full_pool):
    (only,) = [r for r in repo.active(USER_ID) if r.project_key == PROJECT.key]

    learned = learn(memories, [touch(only, PROJECT), insert("uses pnpm", PROJECT)],
                    shown(only, group=PROJECT))

    assert only.status == Status.ACTIVE
    assert (learned.touched, learned.demoted, learned.dropped) == (1, 0, 1)


def test_a_full_pool_never_demotes_a_row_the_run_just_wrote(memories, repo, uow, full_pool):
    learned = learn(memories, [insert("uses pnpm", PROJECT), insert("uses pnpm 9", PROJECT)])

    assert [r.content for r in repo.active(USER_ID) if r.project_key == PROJECT.key] == \
        ["uses pnpm"]
    assert (learned.inserted, learned.demoted, learned.dropped) == (1, 1, 1)


@pytest.mark.parametrize("status", [Status.ACTIVE, Status.DISMISSED])
def test_words_a_full_pool_has_already_demote_nothing(memories, repo, uow, full_pool, status):
    known = repo.seed(USER_ID, PROJECT, "uses pnpm", status=status)

    learned = learn(memories, [insert("uses pnpm", PROJECT)])

    assert learned.demoted == 0 and learned.inserted == 0
    assert known.status == status
    assert len(repo.active(USER_ID)) == len(full_pool) + 100 + (status is Status.ACTIVE)


def test_a_run_demotes_at_most_three_rows(memories, repo, uow, full_pool):
    facts = [insert(f"fact {n}") for n in range(EXTRACT_MAX_ITEMS + 1)]

    learned = learn(memories, facts)

    assert (learned.inserted, learned.demoted, learned.dropped) == (
        EXTRACT_MAX_ITEMS, EXTRACT_MAX_ITEMS, 1)
    assert [r.status for r in full_pool[:EXTRACT_MAX_ITEMS + 1]] == \
        [Status.DISMISSED] * EXTRACT_MAX_ITEMS + [Status.ACTIVE]


def test_a_stale_row_dismissed_meanwhile_frees_its_slot_without_a_demotion(memories, repo, uow,
                                                                           full_pool):
    stalest = full_pool[0]
    repo.meanwhile(lambda: setattr(stalest, "status", Status.DISMISSED.value))

    learned = learn(memories, [insert("uses pnpm")])

    assert (learned.inserted, learned.demoted) == (1, 0)
    assert learned.active == ACTIVE_PER_USER_MAX
    assert kinds(uow) == [EventType.CREATED]
