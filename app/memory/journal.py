"""The journal: a memory_event row for every change of a memory (SPEC §8 Provenance).

The unit of work asks for the rows of the events the aggregate recorded just before it commits
(`flush_rows`, the flush hook `app.memory.init_app` registers),
so they are in the same transaction as the change, whoever made it, and sends them in one round
trip with the transaction's other rows. A memory deleted for good takes its rows with it
(deleted means gone).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from app.database.batches import Read, Written, written
from app.db_types import iso
from app.extensions import db
from app.memory.events import Changed, Deleted, Event, EventType
from app.memory.models import MemoryEvent, MemoryItem
from app.memory.rules import ID_MAX


def _stored_before(event: Changed) -> str | None:
    if isinstance(event.before, list):
        return json.dumps(event.before, ensure_ascii=False)
    return event.before


# One change's row; a transaction's rows go in one round trip with the unit of work's other
# rows (`UnitOfWork.flush`, through `flush_rows`).
JOURNAL_ROW = sa.insert(MemoryEvent).values(
    {name: sa.bindparam(name) for name in ("memory_id", "user_id", "type", "actor",
                                           "session_id", "before", "after", "at")})


def purge(events: Sequence[Event]) -> set[int]:
    """Delete the journal of the memories these events deleted; their ids."""
    gone = [e for e in events if isinstance(e, Deleted)]
    deleted = {i for e in gone for i in e.memory_ids}
    if deleted:
        # With the user id, as every statement on a per-user table (sharding by user).
        db.session.execute(sa.delete(MemoryEvent).where(sa.or_(*(
            (MemoryEvent.user_id == e.user_id) & MemoryEvent.memory_id.in_(e.memory_ids)
            for e in gone))).execution_options(synchronize_session=False))
    return deleted


def flush_rows(events: Sequence[Event]) -> list[Read[Written]]:
    """The unit of work's flush hook: the journal of what deleted memories leave is deleted now,
    and the rows of the other changes are returned, to go with the transaction's other rows."""
    return rows(events, purge(events))


def rows(events: Sequence[Event], deleted: Collection[int]) -> list[Read[Written]]:
    """The journal rows of one transaction's changes, but of memories it deleted."""
    return [written(JOURNAL_ROW, {"memory_id": e.memory_id, "user_id": e.user_id,
                                   "type": e.type.value, "actor": e.actor.value,
                                   "session_id": e.session_id, "before": _stored_before(e),
                                   "after": e.after, "at": e.at})
            for e in events if isinstance(e, Changed) and e.memory_id not in deleted]


@dataclass(frozen=True)
class Entry:
    """One event of a memory's history, as the API shows it."""

    id: int
    type: str
    at: datetime
    actor: str
    session_id: int | None
    before: str | list[str] | None
    after: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "type": self.type, "at": iso(self.at), "actor": self.actor,
                "sessionId": self.session_id, "before": self.before, "after": self.after}


def history(user_id: int, memory_id: int) -> list[Entry] | None:
    """The memory's events, oldest first; None when the user has no such memory.

    One query on idx_memory_event_memory, in its order: every memory has at least its CREATED
    event, so only a memory from before the journal existed needs a second look to tell "no
    events" from "no such memory".
    """
    if not 0 < memory_id <= ID_MAX:
        return None
    events = db.session.scalars(
        sa.select(MemoryEvent)
        .where(MemoryEvent.memory_id == memory_id, MemoryEvent.user_id == user_id)
        .order_by(MemoryEvent.id)).all()
    if events:
        return [_entry(event) for event in events]
    exists = db.session.scalar(sa.select(MemoryItem.id).where(
        MemoryItem.id == memory_id, MemoryItem.user_id == user_id))
    return None if exists is None else []


def edited_by_user(user_id: int, memory_ids: Collection[int]) -> set[int]:
    """Which of the memories the user has edited (an EDITED event), one query on the index."""
    wanted = [i for i in memory_ids if 0 < i <= ID_MAX]
    if not wanted:
        return set()
    return set(db.session.scalars(
        sa.select(MemoryEvent.memory_id).distinct()
        .where(MemoryEvent.memory_id.in_(wanted), MemoryEvent.user_id == user_id,
               MemoryEvent.type == EventType.EDITED.value)))


def _entry(event: MemoryEvent) -> Entry:
    before: str | list[str] | None = event.before
    if event.type == EventType.CONSOLIDATED and isinstance(before, str):
        before = json.loads(before)
    return Entry(event.id, event.type, event.at, event.actor, event.session_id, before,
                 event.after)
