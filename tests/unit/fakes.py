"""In-memory stand-ins for the SQL repository and the unit of work (the cosmicpython pattern), so
`UserMemories` can be tested with no database, no Redis and no Flask app.

`FakeRepository` has the functions of `app.memory.repository` that `UserMemories` calls, each
with the conditions its SQL writes (the user's rows only; a group is the USER scope or one
project key; "machine-made" is AUTO or CONSOLIDATED; the unique key on (user_id, dedup_hash)
raises IntegrityError). `FakeUnitOfWork` keeps what a transaction would: the recorded events,
and on rollback the rows as they were when it began. When a rule changes in the SQL, change it
here too: the integration tests (`tests/extraction`, `tests/user`) hold the SQL to the same rules
on MariaDB.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any

from sqlalchemy.exc import IntegrityError

from app.memory.memories import Repository
from app.memory.models import MemoryItem
from app.memory.repository import Displacement, MachineRow, Wording
from app.memory.rules import MACHINE_SOURCES, Group, Scope, Source, Status

USER_ID = 7
OTHER_USER_ID = 8
SESSION_ID = 77  # the platform session an extraction learns from

# Seeded rows are older than anything the code under test writes (it stamps utcnow()).
EPOCH = datetime(2026, 1, 1)
_COLUMNS = ("id", "user_id", "scope", "project_key", "content", "source", "status",
            "dedup_hash", "version", "origin_session_id", "created_at", "updated_at")


class FakeRepository(Repository):
    def __init__(self) -> None:
        self.rows: dict[int, MemoryItem] = {}
        self.calls: list[str] = []  # the repository functions called, in order
        self._next_id = 1
        self._meanwhile: list[tuple[str | None, Callable[[], None]]] = []

    # ---- for the tests ------------------------------------------------------------------

    def seed(self, user_id: int, group: Group, content: str, *, source: Source = Source.AUTO,
             status: Status = Status.ACTIVE, age: int = 0) -> MemoryItem:
        """A row already there; a larger `age` (minutes) is older (updated earlier)."""
        at = EPOCH - timedelta(minutes=age)
        return self._store(MemoryItem(
            user_id=user_id, scope=group.scope.value, project_key=group.key, content=content,
            source=source.value, status=status.value, dedup_hash=group.dedup_hash(content),
            origin_session_id=None, created_at=at, updated_at=at))

    def fill(self, user_id: int, group: Group, count: int, *, source: Source = Source.AUTO,
             age: int = 0) -> list[MemoryItem]:
        """`count` ACTIVE rows, the first the oldest, all older than `age` minutes."""
        return [self.seed(user_id, group, f"filler {group.key} {source} {age} {n}",
                          source=source, age=age + count - n) for n in range(count)]

    def meanwhile(self, change: Callable[[], None], *, before: str | None = None) -> None:
        """Run `change` just before the next write (`before`: the next call of that write
        function): another transaction committing between the aggregate's read and its write."""
        self._meanwhile.append((before, change))

    def row(self, item_id: int) -> MemoryItem | None:
        return self.rows.get(item_id)

    def active(self, user_id: int) -> list[MemoryItem]:
        return [r for r in self.rows.values()
                if r.user_id == user_id and r.status == Status.ACTIVE]

    def snapshot(self) -> dict[int, dict[str, Any]]:
        return {i: {c: getattr(r, c) for c in _COLUMNS} for i, r in self.rows.items()}

    def restore(self, snapshot: dict[int, dict[str, Any]]) -> None:
        """Back to `snapshot`, keeping the objects still there (as an ORM session would)."""
        for item_id in set(self.rows) - set(snapshot):
            del self.rows[item_id]
        for item_id, values in snapshot.items():
            row = self.rows.setdefault(item_id, MemoryItem())
            for column, value in values.items():
                setattr(row, column, value)

    # ---- the rules every statement applies ---------------------------------------------------

    def _store(self, item: MemoryItem) -> MemoryItem:
        self._unique(item.user_id, item.dedup_hash)
        item.version = item.version or 1  # the column's default
        item.id = self._next_id
        self._next_id += 1
        self.rows[item.id] = item
        return item

    def _write(self, name: str) -> None:
        self.calls.append(name)
        due = [(w, c) for w, c in self._meanwhile if w in (None, name)]
        self._meanwhile = [entry for entry in self._meanwhile if entry not in due]
        for _, change in due:
            change()

    def _unique(self, user_id: int, digest: str, but: int | None = None) -> None:
        if any(r.user_id == user_id and r.dedup_hash == digest and r.id != but
               for r in self.rows.values()):
            raise IntegrityError("INSERT INTO memory_item", {}, Exception("uk_memory_dedup"))

    @staticmethod
    def _in_group(row: MemoryItem, group: Group) -> bool:
        if group.project_key is None:
            return row.scope == Scope.USER
        return row.project_key == group.project_key

    def _machine(self, user_id: int, group: Group) -> list[MemoryItem]:
        """The group's machine-made ACTIVE rows (`_in_group` + `machine_made()` in the SQL)."""
        return [r for r in self.rows.values()
                if r.user_id == user_id and self._in_group(r, group)
                and r.status == Status.ACTIVE and r.source in MACHINE_SOURCES]

    def _owned(self, user_id: int, item_id: int) -> MemoryItem | None:
        row = self.rows.get(item_id)
        return row if row is not None and row.user_id == user_id else None

    # ---- app.memory.repository ---------------------------------------------------------------

    def lock_user(self, user_id: int) -> None:
        self.calls.append("lock_user")

    def count_active(self, user_id: int) -> int:
        self.calls.append("count_active")
        return len(self.active(user_id))

    def by_hash(self, user_id: int, digest: str, *, for_update: bool = False) -> Wording | None:
        self.calls.append("by_hash")
        row = next((r for r in self.rows.values()
                    if r.user_id == user_id and r.dedup_hash == digest), None)
        return None if row is None else Wording(row.id, row.status, row.source, row.content,
                                                row.updated_at)

    def add(self, item: MemoryItem) -> MemoryItem:
        self._write("add")
        return self._store(item)

    def owned(self, user_id: int, item_id: int, *, for_update: bool = False
              ) -> MemoryItem | None:
        self.calls.append("owned")
        return self._owned(user_id, item_id)

    def lock_and_count(self, user_id: int, displacing_for: tuple[Group, str] | None = None
                       ) -> tuple[int, Displacement | None]:
        self.calls.append("lock_and_count")
        displacement = (None if displacing_for is None
                        else self._displacement(user_id, *displacing_for, ()))
        return len(self.active(user_id)), displacement

    def machine_rows(self, user_id: int, group: Group, ids: Collection[int] | None = None, *,
                     for_update: bool = False) -> list[MachineRow]:
        self.calls.append("machine_rows")
        rows = [r for r in self._machine(user_id, group) if ids is None or r.id in ids]
        rows.sort(key=lambda r: (r.updated_at, r.id), reverse=True)
        return [MachineRow(r.id, r.content, r.dedup_hash, r.created_at, r.updated_at, r.version)
                for r in rows]

    def _displacement(self, user_id: int, group: Group, digest: str,
                      exclude_ids: Collection[int]) -> Displacement:
        wording = self.by_hash(user_id, digest)
        candidates = sorted((r for r in self._machine(user_id, group) if r.id not in exclude_ids),
                            key=lambda r: (r.updated_at, r.id))
        return Displacement(wording, candidates[0].id if candidates else None)

    def wording_and_stalest(self, user_id: int, group: Group, digest: str,
                            exclude_ids: Collection[int]) -> Displacement:
        self.calls.append("wording_and_stalest")
        return self._displacement(user_id, group, digest, exclude_ids)

    def insert(self, user_id: int, group: Group, content: str, digest: str, *, source: Source,
               session_id: int | None, created_at: datetime, updated_at: datetime) -> int:
        self._write("insert")
        return self._store(MemoryItem(
            user_id=user_id, scope=group.scope.value, project_key=group.key, content=content,
            source=source.value, status=Status.ACTIVE.value, dedup_hash=digest,
            origin_session_id=session_id, created_at=created_at, updated_at=updated_at)).id

    def insert_and_demote(self, user_id: int, group: Group, content: str, digest: str, *,
                          session_id: int | None, now: datetime, stale_id: int
                          ) -> tuple[int, bool]:
        self._write("insert_and_demote")
        item_id = self._store(MemoryItem(
            user_id=user_id, scope=group.scope.value, project_key=group.key, content=content,
            source=Source.AUTO.value, status=Status.ACTIVE.value, dedup_hash=digest,
            origin_session_id=session_id, created_at=now, updated_at=now)).id
        # DEMOTE: the row of that user, if still ACTIVE (any source: the id came from _STALEST).
        stale = self._owned(user_id, stale_id)
        if stale is None or stale.status != Status.ACTIVE:
            return item_id, False
        stale.status, stale.updated_at = Status.DISMISSED.value, now
        stale.version += 1
        return item_id, True

    def _shown(self, row: MemoryItem | None, user_id: int, group: Group,
               version: int | None) -> bool:
        """A machine-made ACTIVE row of the group, still `version` when one is given."""
        return (row is not None and row in self._machine(user_id, group)
                and (version is None or row.version == version))

    def touch(self, user_id: int, item_id: int, now: datetime, group: Group | None = None,
              version: int | None = None) -> bool:
        self._write("touch")
        row = self._owned(user_id, item_id)
        if row is None or row.status != Status.ACTIVE:
            return False
        if group is not None and not self._shown(row, user_id, group, version):
            return False
        row.updated_at = now
        return True

    def machine_content(self, user_id: int, item_id: int, group: Group,
                        version: int | None = None) -> tuple[str, str] | None:
        self.calls.append("machine_content")
        row = self._owned(user_id, item_id)
        if row is None or not self._shown(row, user_id, group, version):
            return None
        return row.content, row.dedup_hash

    def rewrite(self, user_id: int, item_id: int, group: Group, content: str, digest: str,
                now: datetime, version: int | None = None) -> bool:
        self._write("rewrite")
        row = self._owned(user_id, item_id)
        if row is None or not self._shown(row, user_id, group, version):
            return False
        self._unique(user_id, digest, but=item_id)
        row.content, row.dedup_hash, row.updated_at = content, digest, now
        row.version += 1
        return True

    def delete(self, user_id: int, item_ids: Collection[int], group: Group | None = None) -> int:
        self._write("delete")
        gone = [i for i in item_ids if self._owned(user_id, i) is not None
                and (group is None or self.rows[i] in self._machine(user_id, group))]
        for item_id in gone:
            del self.rows[item_id]
        return len(gone)


class FakeUnitOfWork:
    """`app.unit_of_work.UnitOfWork` without a database: the aggregate's events are kept, a
    commit keeps them as committed, and leaving without a commit puts the rows back."""

    def __init__(self, memories: FakeRepository | None = None) -> None:
        self.memories = memories if memories is not None else FakeRepository()
        self.events: list[Any] = []
        self.committed_events: list[Any] = []
        self.committed = False
        self._began = self.memories.snapshot()

    def __enter__(self) -> FakeUnitOfWork:
        self._began = self.memories.snapshot()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if not self.committed:
            self.rollback()

    def record(self, event: Any) -> None:
        self.events.append(event)

    def commit(self) -> None:
        self.committed_events += self.events
        self.events = []
        self.committed = True
        self._began = self.memories.snapshot()

    def rollback(self) -> None:
        self.memories.restore(self._began)
        self.events = []
