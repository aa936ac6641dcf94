"""What the completion webhook does once the request is authentic and well-formed (SPEC §5).

In one transaction: the event row (its unique id makes repeats exact, even concurrent ones), the
session upsert (feeds the projects picker) and the decision (D2, D6, D9); the job is enqueued
before the commit, so when Redis is down the request fails and the rollback leaves nothing
recorded half-way. The LLM is never called here.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import mysql, sqlite
from sqlalchemy.exc import IntegrityError

from app.auth.models import User
from app.auth.service import ensure_user
from app.db_types import utcnow
from app.extensions import db
from app.extraction.models import WebhookEvent
from app.extraction.queue import EXTRACTION, memory_queue
from app.memory.models import UserMemoryPreference
from app.sessions.models import PlatformSession

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


def _auto_capture(user_id: int) -> bool:
    """D9 toggle, in the same round trip that tells whether the user exists."""
    row = db.session.execute(
        sa.select(User.id, UserMemoryPreference.auto_capture_enabled)
        .outerjoin(UserMemoryPreference, UserMemoryPreference.user_id == User.id)
        .where(User.id == user_id)
    ).first()
    if row is None:
        # First seen here: created on the spot (its own tiny transaction, before ours).
        ensure_user(user_id)
        return UserMemoryPreference.auto_capture_enabled_for(user_id)
    return bool(row.auto_capture_enabled)


def _upsert_session(event: TaskCompleted) -> None:
    """One statement, so two first reports of a session cannot collide."""
    table = PlatformSession.__table__
    values = {"id": event.session_id, "user_id": event.user_id,
              "project_key": event.project_key, "workspace": event.workspace,
              "session_type": event.session_type, "channel": event.channel,
              "last_seen_at": utcnow()}
    changed = [name for name in values if name != "id"]
    if db.session.get_bind().dialect.name == "sqlite":
        insert = sqlite.insert(table).values(values)
        statement = insert.on_conflict_do_update(
            index_elements=[table.c.id], set_={n: insert.excluded[n] for n in changed})
    else:
        insert = mysql.insert(table).values(values)
        statement = insert.on_duplicate_key_update({n: insert.inserted[n] for n in changed})
    db.session.execute(statement)


def receive(event: TaskCompleted) -> tuple[bool, str]:
    """Record and decide; returns (enqueued, reason)."""
    try:
        reason = _decide(event, _auto_capture(event.user_id))
        try:
            db.session.execute(sa.insert(WebhookEvent).values(
                event_id=event.event_id, session_id=event.session_id, user_id=event.user_id,
                phase=event.phase, reason=reason, received_at=utcnow()))
        except IntegrityError:
            # The event is known (a concurrent first delivery waited for here, then committed).
            db.session.rollback()
            return False, DUPLICATE_EVENT
        _upsert_session(event)
        enqueued = False
        if reason == ENQUEUED:
            enqueued = memory_queue().enqueue(EXTRACTION, event.job_payload(), event.job_id)
            if not enqueued:
                # Redis still holds a job for this event (a delivery whose commit was lost).
                reason = DUPLICATE_EVENT
                db.session.execute(sa.update(WebhookEvent)
                                   .where(WebhookEvent.event_id == event.event_id)
                                   .values(reason=reason))
        db.session.commit()
        return enqueued, reason
    except BaseException:
        db.session.rollback()
        raise
