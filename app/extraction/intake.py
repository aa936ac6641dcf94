"""What the completion webhook does once the request is authentic and well-formed (SPEC §5).

In one transaction — the web request's boundary — the user when first seen, the decision (D2, D6,
D9), the event row (its unique id makes repeats exact, even concurrent ones) and the session
upsert (feeds the projects picker); the job is enqueued before the commit, so when Redis is down
the request fails and the rollback leaves nothing recorded half-way. The LLM is never called
here. This is the hot path of every finished task, so it runs prebuilt statements on the raw
write pool (`app.rawdb`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.exc import IntegrityError

from app.auth.models import INSERT_PLATFORM_USER
from app.db_types import dialect_family, utcnow
from app.extraction.models import INSERT_EVENT
from app.extraction.queue import job_kinds, memory_queue
from app.memory.repository import USER_AND_SWITCH
from app.rawdb import raw_database
from app.sessions.models import UPSERT_SESSION

ENQUEUED = "enqueued"
PHASE_NOT_COMPLETED = "phase_not_completed"
SESSION_TYPE_EXCLUDED = "session_type_excluded"
AUTO_CAPTURE_DISABLED = "auto_capture_disabled"
DUPLICATE_EVENT = "duplicate_event"

COMPLETED = "COMPLETED"  # D2: FAILED / CANCELLED tasks teach nothing
EXCLUDED_SESSION_TYPES = frozenset({"SUBAGENT", "SIDE_TASK"})  # D6: the main session speaks


@dataclass(frozen=True)
class TaskCompleted:
    """A validated webhook body; messages already reduced to their text parts."""

    event_id: str
    session_id: int
    user_id: int
    project_key: str | None
    workspace: str | None
    session_type: str | None
    channel: str | None
    phase: str
    user_message: str | None
    assistant_message: str | None

    @property
    def job_id(self) -> str:
        # Event ids are free text; RQ ids allow letters, digits, '-' and '_' only.
        return "extract-" + hashlib.sha1(self.event_id.encode("utf-8")).hexdigest()

    def job_payload(self) -> dict[str, Any]:
        return {"event_id": self.event_id, "user_id": self.user_id,
                "session_id": self.session_id, "project_key": self.project_key,
                "user_message": self.user_message,
                "assistant_message": self.assistant_message}


def _decide(event: TaskCompleted, auto_capture: bool) -> str:
    if event.phase.strip().upper() != COMPLETED:
        return PHASE_NOT_COMPLETED
    if (event.session_type or "").strip().upper() in EXCLUDED_SESSION_TYPES:
        return SESSION_TYPE_EXCLUDED
    if not auto_capture:
        return AUTO_CAPTURE_DISABLED
    return ENQUEUED


def _timestamp(value: datetime) -> str:
    """DATETIME(6) text both MySQL and SQLite store as is (SQLAlchemy's SQLite format)."""
    return value.isoformat(sep=" ", timespec="microseconds")


def receive(event: TaskCompleted) -> tuple[bool, str]:
    """Record and decide; returns (enqueued, reason).

    Four round trips: the read that decides, the writes in one batch, the job to Redis (only
    when enqueued), the commit. (Folding the read into the insert measured slower.)
    """
    now = _timestamp(utcnow())
    with raw_database().writes.connection() as conn:
        known = conn.first(USER_AND_SWITCH, user_id=event.user_id)
        reason = _decide(event, auto_capture=known is not None and bool(known[1]))
        steps = [] if known is not None else [
            # First seen here: created on the spot (nobody could switch its capture on yet).
            (INSERT_PLATFORM_USER, {"id": event.user_id, "created_at": now})]
        steps += [
            (INSERT_EVENT, {"event_id": event.event_id, "session_id": event.session_id,
                            "user_id": event.user_id, "phase": event.phase, "reason": reason,
                            "received_at": now}),
            (UPSERT_SESSION[dialect_family(conn.dialect.name)], {
                "id": event.session_id, "user_id": event.user_id,
                "project_key": event.project_key, "workspace": event.workspace,
                "session_type": event.session_type, "channel": event.channel,
                "last_seen_at": now}),
        ]
        try:
            conn.batch(*steps)
        except IntegrityError:
            # The event is known (a concurrent first delivery waited for here, then committed).
            return False, DUPLICATE_EVENT
        if reason == ENQUEUED:
            memory_queue().enqueue(job_kinds().extraction, event.job_payload(), event.job_id)
        conn.commit()
    return reason == ENQUEUED, reason
