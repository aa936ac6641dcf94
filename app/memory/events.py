"""What changed in a user's memories, as the aggregate records it for the unit of work.

Every change of a memory is one `Changed` (SPEC §8 Provenance: the journal row written in the same
transaction); a hard delete is one `Deleted` (its journal goes with it: deleted means gone). The
unit of work handles them once, whatever wrote them: the journal inside the transaction, and
the invalidation of the user's cached context block around the commit.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum


class EventType(StrEnum):
    CREATED = "CREATED"
    EDITED = "EDITED"  # content changed by the user
    TOUCHED = "TOUCHED"  # re-confirmed: updated_at moved
    UPDATED = "UPDATED"  # content changed by extraction
    DISMISSED = "DISMISSED"
    RESTORED = "RESTORED"
    DEMOTED = "DEMOTED"  # D14
    CONSOLIDATED = "CONSOLIDATED"  # a row made by D15; `before` lists the merged contents


class Actor(StrEnum):
    USER = "USER"
    EXTRACTION = "EXTRACTION"
    CONSOLIDATION = "CONSOLIDATION"


@dataclass(frozen=True)
class Changed:
    """One memory changed."""

    user_id: int
    memory_id: int
    type: EventType
    actor: Actor
    session_id: int | None  # the platform session that caused it; None for the user's own
    at: datetime
    before: str | list[str] | None = None
    after: str | None = None


@dataclass(frozen=True)
class Deleted:
    """Memories deleted for good."""

    user_id: int
    memory_ids: tuple[int, ...]


@dataclass(frozen=True)
class SettingsChanged:
    """The user's auto-capture switch moved (nothing journaled; what depends on it refreshes)."""

    user_id: int


Event = Changed | Deleted | SettingsChanged
