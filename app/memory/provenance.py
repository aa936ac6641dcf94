"""A memory's history told as a person reads it (我的记忆 and the audit page's 来源与历史).

The journal answers with events; a person asks where a memory came from, whether the agent keeps
re-confirming it and what was changed. This groups the events that way and names each cause's
project, so the page only renders.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from app.memory.events import EventType
from app.memory.journal import Entry
from app.sessions.models import PlatformSession

ORIGINS = (EventType.CREATED, EventType.CONSOLIDATED)


@dataclass(frozen=True)
class Provenance:
    origin: Entry | None  # CREATED or CONSOLIDATED; None for a memory older than the journal
    confirmations: int  # TOUCHED: extraction found the same fact again
    last_confirmed: datetime | None
    changes: Sequence[Entry]  # every other event, oldest first
    projects: dict[int, str | None]  # session id → the project it was reported in

    def project_of(self, entry: Entry) -> str | None:
        return None if entry.session_id is None else self.projects.get(entry.session_id)


def tell(user_id: int, entries: Sequence[Entry]) -> Provenance:
    """`entries` (oldest first) grouped for reading; one query for the sessions' projects."""
    origin = next((e for e in entries if e.type in ORIGINS), None)
    touches = [e for e in entries if e.type == EventType.TOUCHED]
    changes = [e for e in entries if e is not origin and e.type != EventType.TOUCHED]
    projects = PlatformSession.projects_of(
        user_id, {e.session_id for e in entries if e.session_id is not None})
    return Provenance(origin, len(touches), touches[-1].at if touches else None, changes,
                      projects)
