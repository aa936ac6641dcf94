"""What the completion webhook does once the request is authentic and well-formed (SPEC §5).

In one transaction — the web request's boundary — the user when first seen, the decision (D2, D6,
D9), the event row (its unique id makes repeats exact, even concurrent ones) and the session
upsert (feeds the projects picker); the job is enqueued before the commit, so when Redis is down
the request fails and the rollback leaves nothing recorded half-way. The LLM is never called
here. This is the hot path of every finished task, so it runs prebuilt statements in one batch
on the webhook's own engine (`app.database.engines`), in a transaction SQLAlchemy opens and ends.

A delivery that lost a conflict to a concurrent one (two copies of the same event at once can
deadlock on the event's unique key) is run again: the copy that lost then finds the event and
answers `duplicate_event`, as a replay does.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from sqlalchemy.exc import IntegrityError

from app.auth.models import INSERT_PLATFORM_USER
from app.database.batches import Rows, batch, read, written
from app.database.conflicts import retry_conflicts
from app.database.engines import hot_engines
from app.db_types import dialect_family, utcnow
from app.extraction.models import (
    DUPLICATE_EVENT,
    ENQUEUED,
    EVENT_DECISION,
    INSERT_EVENT,
    PHASE_NOT_COMPLETED,
    RECORD_EVENT,
    SESSION_TYPE_EXCLUDED,
)
from app.extraction.queue import job_kinds, memory_queue
from app.sessions.models import UPSERT_SESSION

COMPLETED = "COMPLETED"  # D2: FAILED / CANCELLED tasks teach nothing
EXCLUDED_SESSION_TYPES = frozenset({"SUBAGENT", "SIDE_TASK"})  # D6: the main session speaks


@dataclass(frozen=True)
class CompletedTask:
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


def _decide(event: CompletedTask) -> str:
    """D2 and D6, from the body alone; `enqueued` then still waits on D9 (`INSERT_EVENT`)."""
    if event.phase.strip().upper() != COMPLETED:
        return PHASE_NOT_COMPLETED
    if (event.session_type or "").strip().upper() in EXCLUDED_SESSION_TYPES:
        return SESSION_TYPE_EXCLUDED
    return ENQUEUED


@retry_conflicts
def receive(event: CompletedTask) -> str:
    """Record and decide; returns the reason (SPEC §5), `enqueued` when the job was.

    Three round trips: the writes and the decision they made in one batch, the job to Redis
    (only when enqueued), the commit — one fewer than the floor's (`bench.run webhook`). A
    user first seen costs one more, off the hot path: nobody could switch their capture on yet.
    Any failure inside the block rolls the transaction back, a known event included.
    """
    now = utcnow()
    record = {"event_id": event.event_id, "session_id": event.session_id,
              "user_id": event.user_id, "phase": event.phase, "decided": _decide(event),
              "received_at": now}
    try:
        with hot_engines().writes.begin() as conn:
            session = written(UPSERT_SESSION[dialect_family(conn.dialect.name)], {
                "id": event.session_id, "user_id": event.user_id,
                "project_key": event.project_key, "workspace": event.workspace,
                "session_type": event.session_type, "channel": event.channel,
                "last_seen_at": now})
            if conn.dialect.insert_returning:
                decision, _ = batch(conn, read(RECORD_EVENT, record, _decision), session)
            else:
                _, _, decision = batch(conn, written(INSERT_EVENT, record), session,
                                       read(EVENT_DECISION, {"event_id": event.event_id},
                                            _decision))
            reason, known_user = decision
            if known_user is None:
                conn.execute(INSERT_PLATFORM_USER, {"id": event.user_id, "created_at": now})
            if reason == ENQUEUED:
                memory_queue().enqueue(job_kinds().extraction, event.job_payload(),
                                       event.job_id)
    except IntegrityError as exc:
        if not _event_known(exc):
            raise
        # The event is known (a replay, or a concurrent first delivery waited for here, then
        # committed); the block rolled back.
        return DUPLICATE_EVENT
    return reason


def _decision(found: Rows) -> tuple[str, int | None]:
    """The reason the event row holds, and the user's id when the user is known."""
    reason, known_user = found[0]
    return reason, known_user


def _event_known(exc: IntegrityError) -> bool:
    """The failed insert was the event's own (its unique id), not another row's."""
    text = str(exc.orig)
    return "uk_webhook_event_id" in text or "webhook_event.event_id" in text
