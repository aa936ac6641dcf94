"""One user's memories: the only writer of memory_item, whoever asks.

Three callers change memories, each through its own methods here:

- the user (`create`, `edit`, `delete`): D7 limits, D12 (an edit keeps the status), the 200 cap;
- extraction (`learn`): the checked candidates of one finished task, under D3, D13 and D14;
- consolidation (`consolidate`): a validated D15 plan for one group, all or nothing.

Each guard is written once below and shared by the callers that need it: the per-user lock
before anything that can grow the ACTIVE count, "a dismissed wording is never resurrected" (D3),
"a hand-written row is never matched, rewritten, demoted or merged" (the repository's
`machine_made`). Every change is recorded in the unit of work as an event (`events.Changed`,
`events.Deleted`), so what follows a change — the journal, the context cache — happens in one
place for all writers. Nothing here commits: the caller's unit of work does.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Protocol

from sqlalchemy.exc import IntegrityError

from app.db_types import utcnow
from app.errors import DuplicateContent, LimitReached, MemoryNotFound, VersionConflict
from app.memory import repository as sql_repository
from app.memory.events import Actor, Changed, Deleted, EventType
from app.memory.models import MemoryItem
from app.memory.repository import Displacement, MachineRow, Wording
from app.memory.rules import (
    ACTIVE_PER_USER_MAX,
    EXTRACT_MAX_ITEMS,
    MACHINE_SOURCES,
    Group,
    Source,
    Status,
    credential,
)
from app.unit_of_work import UnitOfWork

log = logging.getLogger(__name__)

class Repository(Protocol):
    """What `UserMemories` reads and writes through: the module `app.memory.repository` (SQL),
    or the unit tier's in-memory stand-in (tests/unit/fakes.py). The type checker holds both to
    these signatures."""

    def lock_user(self, user_id: int) -> None: ...

    def count_active(self, user_id: int) -> int: ...

    def lock_and_count(self, user_id: int, displacing_for: tuple[Group, str] | None = None
                       ) -> tuple[int, Displacement | None]: ...

    def owned(self, user_id: int, item_id: int, *, for_update: bool = False
              ) -> MemoryItem | None: ...

    def add(self, item: MemoryItem) -> MemoryItem: ...

    def by_hash(self, user_id: int, digest: str, *, for_update: bool = False
                ) -> Wording | None: ...

    def insert(self, user_id: int, group: Group, content: str, digest: str, *, source: Source,
               session_id: int | None, created_at: datetime, updated_at: datetime) -> int: ...

    def insert_and_demote(self, user_id: int, group: Group, content: str, digest: str, *,
                          session_id: int | None, now: datetime, stale_id: int
                          ) -> tuple[int, bool]: ...

    def wording_and_stalest(self, user_id: int, group: Group, digest: str,
                            exclude_ids: Collection[int]) -> Displacement: ...

    def touch(self, user_id: int, item_id: int, now: datetime, group: Group | None = None,
              version: int | None = None) -> bool: ...

    def rewrite(self, user_id: int, item_id: int, group: Group, content: str, digest: str,
                now: datetime, version: int | None = None) -> bool: ...

    def machine_content(self, user_id: int, item_id: int, group: Group,
                        version: int | None = None) -> tuple[str, str] | None: ...

    def machine_rows(self, user_id: int, group: Group, ids: Collection[int] | None = None, *,
                     for_update: bool = False) -> list[MachineRow]: ...

    def delete(self, user_id: int, item_ids: Collection[int], group: Group | None = None
               ) -> int: ...


# ---- what extraction and consolidation hand over ------------------------------------------

class Action(StrEnum):
    """What the model said about a fact (seed §10.1 protocol)."""

    INSERT = "insert"
    TOUCH = "touch"
    UPDATE = "update"


@dataclass(frozen=True)
class Fact:
    """A checked candidate of one extraction, placed in the group it belongs to."""

    action: Action
    group: Group
    content: str | None  # normalized, ≤ 120 code points; None for a touch
    existing_id: int | None = None  # touch and update: the comparison-set row it names


@dataclass(frozen=True)
class Merge:
    source_ids: tuple[int, ...]
    content: str  # normalized, at most EXTRACTED_CONTENT_MAX code points


@dataclass
class Plan:
    """A validated D15 plan for one group: every id is one of the group's inputs, named once."""

    merges: list[Merge] = field(default_factory=list)
    keeps: list[int] = field(default_factory=list)
    drops: list[int] = field(default_factory=list)

    @property
    def referenced(self) -> list[int]:
        """Every row the plan names; the write re-checks them all under lock."""
        return [i for m in self.merges for i in m.source_ids] + self.keeps + self.drops

    @property
    def changes_anything(self) -> bool:
        return bool(self.merges or self.drops)


@dataclass
class Learned:
    """What one extraction changed."""

    inserted: int = 0
    touched: int = 0
    updated: int = 0
    dropped: int = 0
    demoted: int = 0
    stale: int = 0  # touches/updates of rows changed since the model saw them (not applied)
    secrets_dropped: int = 0  # facts holding a credential (SPEC §11), never stored
    written_groups: set[Group] = field(default_factory=set)  # inserted into or rewritten
    active: int | None = None  # the user's ACTIVE memories when the run ended


@dataclass(frozen=True)
class Consolidated:
    """What one consolidation changed."""

    inserted: int
    touched: int
    refused: int  # merges whose words the user had dismissed
    merges: int
    drops: int
    rows_out: int
    secrets_refused: int = 0  # merges whose words hold a credential (SPEC §11)


class GroupChanged(Exception):
    """The group is no longer what the model saw: the plan is not applied at all."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# ---- the aggregate ---------------------------------------------------------------------------

class UserMemories:
    """The memories of `user_id`, changed on behalf of `actor` (and of `session_id`, the platform
    session that caused an extraction), read and written through `repository` (the SQL one
    unless a test hands in a fake)."""

    def __init__(self, uow: UnitOfWork, user_id: int, actor: Actor,
                 session_id: int | None = None, *,
                 repository: Repository = sql_repository) -> None:
        self.uow = uow
        self.repository = repository
        self.user_id = user_id
        self.actor = actor
        self.session_id = session_id

    # ---- shared guards -----------------------------------------------------------------

    def _lock(self) -> None:
        """Serializes every writer that can grow this user's ACTIVE count (manual create and
        restore, extraction), so a count taken after it stays exact until the commit."""
        self.repository.lock_user(self.user_id)

    def _ensure_room(self) -> None:
        if self.repository.count_active(self.user_id) >= ACTIVE_PER_USER_MAX:
            raise LimitReached(
                "active_limit",
                f"at most {ACTIVE_PER_USER_MAX} active memories; delete or dismiss some first")

    def _changed(self, memory_id: int, kind: EventType, at: datetime, *,
                 before: str | list[str] | None = None, after: str | None = None) -> None:
        self.uow.record(Changed(self.user_id, memory_id, kind, self.actor, self.session_id, at,
                                before, after))

    def _deleted(self, memory_ids: Collection[int]) -> None:
        self.uow.record(Deleted(self.user_id, tuple(memory_ids)))

    # ---- the user's own changes -------------------------------------------------------

    def create(self, group: Group, content: str) -> MemoryItem:
        """A MANUAL memory (seed §5.3): not a duplicate, within the 200 ACTIVE cap."""
        digest = group.dedup_hash(content)
        self._lock()
        if self.repository.by_hash(self.user_id, digest) is not None:
            raise DuplicateContent()
        self._ensure_room()
        now = utcnow()
        try:
            item = self.repository.add(MemoryItem(
                user_id=self.user_id, scope=group.scope.value, project_key=group.key,
                content=content, source=Source.MANUAL.value, status=Status.ACTIVE.value,
                dedup_hash=digest, created_at=now, updated_at=now))
        except IntegrityError:
            raise DuplicateContent() from None  # the same words, written meanwhile
        self._changed(item.id, EventType.CREATED, now, after=content)
        return item

    def get(self, item_id: int, *, for_update: bool = False) -> MemoryItem:
        item = self.repository.owned(self.user_id, item_id, for_update=for_update)
        if item is None:
            raise MemoryNotFound()
        return item

    def _check_version(self, item: MemoryItem, expected: Collection[int] | None) -> None:
        """The caller's precondition (If-Match), on the row locked by `get(for_update=True)`:
        no other writer can raise its version between this check and the commit."""
        if expected is not None and item.version not in expected:
            raise VersionConflict(_detached(item), expected)

    def edit(self, item_id: int, *, content: str | None = None,
             status: Status | None = None,
             expected_versions: Collection[int] | None = None) -> MemoryItem:
        """New words (re-hashed; the status stays, D12) and/or ACTIVE ↔ DISMISSED. Restoring
        counts against the 200 cap. `expected_versions`: change the row only while its version
        is one of them, else VersionConflict (None: the last write wins)."""
        restoring = status is Status.ACTIVE
        if restoring:
            self._lock()
        item = self.get(item_id, for_update=True)
        self._check_version(item, expected_versions)
        now = utcnow()
        changed = False
        if content is not None:
            digest = Group.of(item.scope, item.project_key).dedup_hash(content)
            clash = self.repository.by_hash(self.user_id, digest)
            if clash is not None and clash.id != item.id:
                raise DuplicateContent()
            if content != item.content:
                self._changed(item.id, EventType.EDITED, now, before=item.content, after=content)
                changed = True
            item.content, item.dedup_hash = content, digest
        if status is not None and status != item.status:
            if restoring:
                self._ensure_room()
            self._changed(item.id, EventType.RESTORED if restoring else EventType.DISMISSED, now)
            item.status = status.value
            changed = True
        if changed:
            item.version += 1
        item.updated_at = now
        return item

    def delete(self, item_id: int, *, expected_versions: Collection[int] | None = None) -> None:
        """Physical delete (D3: the same fact may be learnt again later); with
        `expected_versions`, only while the row's version is one of them (as `edit`)."""
        if expected_versions is not None:
            self._check_version(self.get(item_id, for_update=True), expected_versions)
        if self.repository.delete(self.user_id, [item_id]) != 1:
            raise MemoryNotFound()
        self._deleted([item_id])

    # ---- extraction (seed §5.6, §10.1-§10.2) -------------------------------------------

    def learn(self, facts: Sequence[Fact], references: Mapping[Group, Mapping[int, int]], *,
              pool_full: bool = False) -> Learned:
        """Apply one extraction's facts; `references` are the rows the model was shown, per
        group, each id with the version it was shown — a touch or update naming any other row
        (MANUAL, DISMISSED, another group's, unknown) is dropped, never turned into an insert;
        one naming a row changed since that version is not applied and counted `stale` (SPEC
        §11: what the model proposed applies to what it saw). `pool_full`: the caller has seen
        the user's pool full (D14), so a first fact that is an insert learns where its room
        comes from with the lock, in the same round trip."""
        run = _Learning(self, Learned())
        # SPEC §11: a fact holding a credential is never stored; the others still apply. Left
        # out before anything else, so the first fact below is the first one stored.
        kept = [fact for fact in facts if not self._holds_credential(fact.content)]
        run.learned.secrets_dropped, facts = len(facts) - len(kept), kept
        first = facts[0] if facts else None
        displacing_for = None
        if pool_full and first is not None and first.action is Action.INSERT:
            assert first.content is not None
            displacing_for = (first.group, first.group.dedup_hash(first.content))
        # The lock `_lock` takes.
        run.active, run.displacement = self.repository.lock_and_count(self.user_id,
                                                                      displacing_for)
        for fact in facts:
            shown = references.get(fact.group, {})
            if fact.action is Action.INSERT:
                run.insert(fact.group, fact.content)
            elif fact.existing_id is None or fact.existing_id not in shown:
                run.learned.dropped += 1
            elif fact.action is Action.TOUCH:
                run.confirm(fact.existing_id, fact.group, shown[fact.existing_id])
            else:
                run.reword(fact.existing_id, fact.group, fact.content, shown[fact.existing_id])
        run.learned.active = run.active
        return run.learned

    # ---- consolidation (seed §10.3) -----------------------------------------------------

    def consolidate(self, group: Group, plan: Plan, seen: Mapping[int, int]) -> Consolidated:
        """Apply a plan to the group's machine-made rows; `seen` maps each row the model was
        shown to its version. Raises GroupChanged when any named row is no longer exactly
        what the model saw (another version, or gone), or the merged words appeared
        meanwhile."""
        self._lock()
        current = {row.id: row for row in self.repository.machine_rows(
            self.user_id, group, plan.referenced, for_update=True)}
        if any(current.get(i) is None or current[i].version != seen[i]
               for i in plan.referenced):
            # Edited, dismissed, demoted or deleted since the model saw it: the plan may rest on
            # words that are no longer there.
            raise GroupChanged("inputs_changed")
        clean = [m for m in plan.merges if not self._holds_credential(m.content)]
        merges = [m for m in clean if not self._dismissed_wording(group, m.content)]
        deleted = [i for m in merges for i in m.source_ids] + plan.drops
        if deleted:
            if self.repository.delete(self.user_id, deleted, group) != len(deleted):
                # The rows are locked by us, so this is a bug: fail the group, never half of it.
                raise RuntimeError(f"could not delete all of {len(deleted)} locked rows")
            self._deleted(deleted)
        inserted = touched = 0
        for merge in merges:
            new_row, carried = self._merge(group, merge, [current[i] for i in merge.source_ids])
            inserted, touched = inserted + new_row, touched + carried
        return Consolidated(inserted=inserted, touched=touched,
                            refused=len(clean) - len(merges), merges=len(merges),
                            drops=len(plan.drops), rows_out=len(seen) - len(deleted) + inserted,
                            secrets_refused=len(plan.merges) - len(clean))

    def _holds_credential(self, content: str | None) -> bool:
        """True when `content` holds a credential (SPEC §11): the fact or merge is not applied,
        its sources kept. Logged with the kind, never the words."""
        kind = None if content is None else credential(content)
        if kind is None:
            return False
        log.info("event=memory.credential_refused user=%s actor=%s session=%s kind=%s",
                 self.user_id, self.actor, self.session_id, kind)
        return True

    def _dismissed_wording(self, group: Group, content: str) -> bool:
        """True when a DISMISSED row has these exact words: the merge is refused and its
        sources kept (never resurrected, D3; never lost either)."""
        clash = self.repository.by_hash(self.user_id, group.dedup_hash(content), for_update=True)
        if clash is None or clash.status != Status.DISMISSED:
            return False
        log.info("event=consolidation.merge_refused user=%s reason=dismissed_wording item=%s",
                 self.user_id, clash.id)
        return True

    def _merge(self, group: Group, merge: Merge,
               sources: list[MachineRow]) -> tuple[int, int]:
        """Insert the merged row, or keep the ACTIVE row that already says it: (1, 0) for an
        insert, (0, 1) when a machine row's updated_at moved, else (0, 0).

        A merged row inherits its sources' history — created when the oldest was, last
        confirmed when the newest was — so consolidating does not reorder what is injected.
        """
        digest = group.dedup_hash(merge.content)
        created_at = min(s.created_at for s in sources)
        updated_at = max(s.updated_at for s in sources)
        existing = self.repository.by_hash(self.user_id, digest, for_update=True)
        if existing is None:
            try:
                item_id = self.repository.insert(self.user_id, group, merge.content, digest,
                                                 source=Source.CONSOLIDATED, session_id=None,
                                                 created_at=created_at, updated_at=updated_at)
            except IntegrityError as exc:
                raise GroupChanged("concurrent_write") from exc
            self._changed(item_id, EventType.CONSOLIDATED, updated_at,
                          before=[s.content for s in sources], after=merge.content)
            return 1, 0
        if existing.status != Status.ACTIVE:
            # Dismissed since the check above (a writer outside the user lock): the sources are
            # gone already, so the whole group goes back.
            raise GroupChanged("concurrent_write")
        if existing.source not in MACHINE_SOURCES or existing.updated_at >= updated_at:
            return 0, 0  # a MANUAL row is never changed; a newer row needs nothing
        self.repository.touch(self.user_id, existing.id, updated_at)
        self._changed(existing.id, EventType.TOUCHED, updated_at)
        return 0, 1


def _detached(item: MemoryItem) -> MemoryItem:
    """A copy of `item` outside the session: what a refusal shows must survive the rollback
    that follows it (which expires the session's rows, and would read them again)."""
    return MemoryItem(**{column.key: getattr(item, column.key)
                         for column in MemoryItem.__mapper__.column_attrs})


@dataclass
class _Learning:
    """The write phase of one extraction, under the user's lock."""

    memories: UserMemories
    learned: Learned
    active: int = 0
    written: set[int] = field(default_factory=set)  # rows this run inserted or confirmed
    displacement: Displacement | None = None  # found with the lock for the first fact, an insert

    @property
    def user_id(self) -> int:
        return self.memories.user_id

    @property
    def repository(self) -> Repository:
        return self.memories.repository

    def _touch(self, item_id: int, group: Group | None = None,
               version: int | None = None) -> bool:
        """Re-confirm an ACTIVE row (with `group`: only a machine-made row of it, and with
        `version` only while still that version)."""
        now = utcnow()
        if not self.repository.touch(self.user_id, item_id, now, group, version):
            return False
        self.learned.touched += 1
        self.written.add(item_id)
        self.memories._changed(item_id, EventType.TOUCHED, now)
        return True

    def _known_wording(self, digest: str) -> bool:
        return self._known(self.repository.by_hash(self.user_id, digest))

    def _known(self, row: Wording | None) -> bool:
        """The exact-hash pre-check, on the row that says the words: ACTIVE → re-confirmed;
        DISMISSED → dropped, never resurrected (D3). False when no row says them."""
        if row is None:
            return False
        if row.status != Status.ACTIVE or not self._touch(row.id):
            self.learned.dropped += 1
        return True

    def confirm(self, item_id: int, group: Group, version: int) -> None:
        """A touch of a row the model was shown at `version`: stale when it changed since."""
        if not self._touch(item_id, group, version):
            self.learned.stale += 1

    def reword(self, item_id: int, group: Group, content: str | None, version: int) -> None:
        assert content is not None
        current = self.repository.machine_content(self.user_id, item_id, group, version)
        if current is None:
            self.learned.stale += 1  # edited, dismissed, demoted or deleted since it was shown
            return
        before, current_digest = current
        digest = group.dedup_hash(content)
        if digest == current_digest or self.repository.by_hash(self.user_id, digest) is not None:
            # Same wording, or another row already says it: re-confirm instead (seed §10.1).
            self.confirm(item_id, group, version)
            return
        now = utcnow()
        try:
            rewritten = self.repository.rewrite(self.user_id, item_id, group, content, digest,
                                                now, version)
        except IntegrityError:
            # A concurrent manual edit took this wording first: the clash branch after all.
            rewritten = False
        if not rewritten:
            self.confirm(item_id, group, version)
            return
        self.learned.updated += 1
        self.learned.written_groups.add(group)
        self.written.add(item_id)
        self.memories._changed(item_id, EventType.UPDATED, now, before=before, after=content)

    def insert(self, group: Group, content: str | None) -> None:
        assert content is not None
        digest = group.dedup_hash(content)
        stale = None
        displacement, self.displacement = self.displacement, None  # only the first fact's
        if self.active >= ACTIVE_PER_USER_MAX:
            # Words the user has already are a re-confirmation (or D3), not a reason to demote.
            # D14: make room by demoting the group's oldest machine-made row, one per insert,
            # at most EXTRACT_MAX_ITEMS per run; no such row → this insert is dropped.
            wording, stale = displacement or self.repository.wording_and_stalest(
                self.user_id, group, digest, self.written)
            if self._known(wording):
                return
            if self.learned.demoted >= EXTRACT_MAX_ITEMS:
                stale = None
            if stale is None:
                log.info("event=extraction.insert_dropped user=%s session=%s reason=pool_full",
                         self.user_id, self.memories.session_id)
                self.learned.dropped += 1
                return
        now = utcnow()
        try:
            if stale is None:
                item_id = self.repository.insert(self.user_id, group, content, digest,
                                                 source=Source.AUTO,
                                                 session_id=self.memories.session_id,
                                                 created_at=now, updated_at=now)
            else:
                item_id, demoted = self.repository.insert_and_demote(
                    self.user_id, group, content, digest, session_id=self.memories.session_id,
                    now=now, stale_id=stale)
        except IntegrityError:
            # The unique key knew these words (usually: the row is there, so checking first
            # would cost every new fact a read): re-confirmed if ACTIVE, dropped if DISMISSED
            # (D3) — and if the clash is gone again (a concurrent delete), dropped.
            if not self._known_wording(digest):
                self.learned.dropped += 1
            return
        self.learned.inserted += 1
        self.learned.written_groups.add(group)
        self.active += 1
        self.written.add(item_id)
        self.memories._changed(item_id, EventType.CREATED, now, after=content)
        if stale is not None:
            self.demoted(stale, demoted, now)

    def demoted(self, item_id: int, demoted: bool, now: datetime) -> None:
        """After a D14 soft demotion (DISMISSED, visible and restorable, updated_at moved)."""
        # Not demoted: the user dismissed or deleted it meanwhile; the slot is free either way.
        self.active -= 1
        if demoted:
            self.learned.demoted += 1
            self.memories._changed(item_id, EventType.DEMOTED, now)
