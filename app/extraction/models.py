"""What the pipeline keeps about its own work: received webhook events, job outcomes and the
per-user consolidation cooldown."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import mysql
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Mapped, mapped_column

from app.auth.models import User
from app.database.batches import Row, affected
from app.db_types import BigId, ProjectKey, Timestamp, iso, table_of, utcnow
from app.extensions import Model, db
from app.memory.repository import SWITCHED_ON
from app.paging import Page, PageRequest, paginate

EVENT_ID_MAX = 128

# The webhook's answers (SPEC §5), kept on the event row as its reason.
ENQUEUED = "enqueued"
PHASE_NOT_COMPLETED = "phase_not_completed"
SESSION_TYPE_EXCLUDED = "session_type_excluded"
AUTO_CAPTURE_DISABLED = "auto_capture_disabled"
DUPLICATE_EVENT = "duplicate_event"
REASONS = (ENQUEUED, PHASE_NOT_COMPLETED, SESSION_TYPE_EXCLUDED, AUTO_CAPTURE_DISABLED,
           DUPLICATE_EVENT)

# Event ids are opaque: compared byte for byte, so 'a' and 'A' are two events.
EventId = sa.String(EVENT_ID_MAX).with_variant(
    mysql.VARCHAR(EVENT_ID_MAX, charset="utf8mb4", collation="utf8mb4_bin"), "mysql", "mariadb"
)


class WebhookEvent(Model):
    """One completion event the webhook accepted; the unique event id makes repeats exact."""

    __tablename__ = "webhook_event"
    __table_args__ = (
        sa.UniqueConstraint("event_id", name="uk_webhook_event_id"),
        sa.Index("idx_webhook_event_reason", "reason"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    event_id: Mapped[str] = mapped_column(EventId, nullable=False)
    session_id: Mapped[int] = mapped_column(sa.BigInteger, nullable=False)
    user_id: Mapped[int] = mapped_column(sa.BigInteger, nullable=False)
    phase: Mapped[str] = mapped_column(sa.String(32), nullable=False)
    reason: Mapped[str] = mapped_column(sa.String(32), nullable=False,
                                        comment="the webhook's answer: enqueued or why not")
    received_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow, nullable=False)


# The webhook's statements, run in one batch on the webhook's engine (app.database.batches).
#
# The event row decides its own reason: what D2/D6 decided from the body (`decided`), unless
# that is `enqueued`; then the user's D9 switch, read by the insert itself, so the row and the
# answer agree even against a concurrent toggle. A plain INSERT … VALUES: for an INSERT …
# SELECT, InnoDB (in MariaDB's default lock mode) holds the table's AUTO-INC lock throughout.
INSERT_EVENT = sa.insert(table_of(WebhookEvent)).values(
    {**{name: sa.bindparam(name) for name in ("event_id", "session_id", "user_id", "phase",
                                              "received_at")},
     "reason": sa.case((sa.bindparam("decided") != sa.literal(ENQUEUED), sa.bindparam("decided")),
                       (SWITCHED_ON, sa.literal(ENQUEUED)),
                       else_=sa.literal(AUTO_CAPTURE_DISABLED))})
# What the webhook needs back: the reason the row holds, and whether its user is known. Handed
# back by the insert itself where the database can (`Dialect.insert_returning`: MariaDB 10.5+,
# SQLite 3.35+), since a read of its own cost every delivery ~70 µs of CPU between the worker
# and the database (`bench.run webhook`); read back in the same batch on MySQL.
RECORD_EVENT = INSERT_EVENT.returning(
    WebhookEvent.reason, sa.select(User.id).where(User.id == sa.bindparam("user_id"))
    .scalar_subquery())
EVENT_DECISION = (sa.select(WebhookEvent.reason, User.id)
                  .outerjoin(User, User.id == WebhookEvent.user_id)
                  .where(WebhookEvent.event_id == sa.bindparam("event_id")))


class JobOutcome(Model):
    """Exactly one row per job (unique job id), whatever became of it."""

    __tablename__ = "memory_job_outcome"
    __table_args__ = (
        sa.UniqueConstraint("job_id", name="uk_memory_job_outcome_job"),
        sa.Index("idx_memory_job_outcome_user", "user_id", "status"),
        sa.Index("idx_memory_job_outcome_status", "status"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    kind: Mapped[str] = mapped_column(sa.String(32), nullable=False, comment="extraction, ...")
    job_id: Mapped[str] = mapped_column(sa.String(64), nullable=False)
    event_id: Mapped[str | None] = mapped_column(EventId)
    user_id: Mapped[int] = mapped_column(sa.BigInteger, nullable=False)
    session_id: Mapped[int | None] = mapped_column(sa.BigInteger)
    status: Mapped[str] = mapped_column(sa.String(16), nullable=False,
                                        comment="succeeded/skipped/abandoned/failed")
    reason: Mapped[str] = mapped_column(sa.String(64), nullable=False)
    attempts: Mapped[int] = mapped_column(sa.Integer, nullable=False)
    model: Mapped[str | None] = mapped_column(sa.String(128))
    prompt_chars: Mapped[int | None] = mapped_column(sa.Integer)
    prompt_tokens: Mapped[int | None] = mapped_column(sa.Integer)
    completion_tokens: Mapped[int | None] = mapped_column(sa.Integer)
    total_tokens: Mapped[int | None] = mapped_column(sa.Integer)
    inserted: Mapped[int] = mapped_column(sa.Integer, nullable=False)
    touched: Mapped[int] = mapped_column(sa.Integer, nullable=False)
    updated: Mapped[int] = mapped_column(sa.Integer, nullable=False)
    dropped: Mapped[int] = mapped_column(sa.Integer, nullable=False)
    demoted: Mapped[int] = mapped_column(sa.Integer, nullable=False)
    stale: Mapped[int] = mapped_column(
        sa.Integer, nullable=False, default=0, server_default="0",
        comment="touches/updates not applied: the row changed since the model saw it")
    # Candidates (or merges) refused for holding a credential (SPEC §11); 0 for older rows.
    secrets_dropped: Mapped[int] = mapped_column(sa.Integer, nullable=False, server_default="0")
    duration_ms: Mapped[int] = mapped_column(sa.Integer, nullable=False)
    created_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow, nullable=False)
    # Consolidation jobs only (NULL on extraction): the group, and what became of its rows.
    scope: Mapped[str | None] = mapped_column(sa.String(16),
                                              comment="consolidation: the group's scope")
    project_key: Mapped[str | None] = mapped_column(
        ProjectKey, comment="consolidation: the project group's key")
    rows_in: Mapped[int | None] = mapped_column(sa.Integer)
    rows_out: Mapped[int | None] = mapped_column(sa.Integer)
    merges: Mapped[int | None] = mapped_column(sa.Integer)
    drops: Mapped[int | None] = mapped_column(sa.Integer)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "kind": self.kind, "jobId": self.job_id, "eventId": self.event_id,
            "userId": self.user_id, "sessionId": self.session_id, "status": self.status,
            "reason": self.reason, "attempts": self.attempts, "model": self.model,
            "promptChars": self.prompt_chars, "promptTokens": self.prompt_tokens,
            "completionTokens": self.completion_tokens, "totalTokens": self.total_tokens,
            "inserted": self.inserted, "touched": self.touched, "updated": self.updated,
            "dropped": self.dropped, "demoted": self.demoted, "stale": self.stale,
            "secretsDropped": self.secrets_dropped, "durationMs": self.duration_ms,
            "createdAt": iso(self.created_at), "scope": self.scope,
            "projectKey": self.project_key, "rowsIn": self.rows_in, "rowsOut": self.rows_out,
            "merges": self.merges, "drops": self.drops,
        }

    @classmethod
    def recorded(cls, job_id: str) -> bool:
        """Whether the job has its outcome already: it ran to the end once."""
        return db.session.scalar(sa.select(cls.id).where(cls.job_id == job_id)) is not None

    @classmethod
    def page(cls, request: PageRequest, *, user_id: int | None = None,
             status: str | None = None, kind: str | None = None) -> Page[JobOutcome]:
        """Newest first (insertion order); filters are optional."""
        conditions = []
        if user_id is not None:
            conditions.append(cls.user_id == user_id)
        if status is not None:
            conditions.append(cls.status == status)
        if kind is not None:
            conditions.append(cls.kind == kind)
        return paginate(sa.select(cls).where(*conditions).order_by(cls.id.desc()), request)

    @classmethod
    def token_totals_by_user(cls, *, user_id: int | None = None, status: str | None = None,
                             limit: int = 20) -> list[tuple[int, str, int, int, int, int]]:
        """(user id, model, jobs, prompt, completion, total tokens) over the outcomes matching
        the filters that reported usage: one GROUP BY (the user filter rides the
        (user_id, status) index), the largest totals first, at most `limit` rows."""
        conditions: list[sa.ColumnElement[bool]] = [cls.model.is_not(None),
                                                    cls.total_tokens.is_not(None)]
        if user_id is not None:
            conditions.append(cls.user_id == user_id)
        if status is not None:
            conditions.append(cls.status == status)
        total = sa.func.sum(cls.total_tokens)
        return [(user, str(model), int(jobs), int(prompt or 0), int(completion or 0),
                 int(tokens or 0))
                for user, model, jobs, prompt, completion, tokens in db.session.execute(
                    sa.select(cls.user_id, cls.model, sa.func.count(),
                              sa.func.sum(cls.prompt_tokens), sa.func.sum(cls.completion_tokens),
                              total)
                    .where(*conditions).group_by(cls.user_id, cls.model)
                    .order_by(total.desc(), cls.user_id, cls.model).limit(limit)
                )]


class ConsolidationState(Model):
    """When each user's last D15 consolidation started: the cooldown, shared by every worker.

    `claim` is the only writer. It decides in one conditional statement, so two jobs of one
    user that finish at the same moment in two processes cannot both pass the cooldown.
    """

    __tablename__ = "memory_consolidation_state"

    user_id: Mapped[int] = mapped_column(sa.BigInteger, primary_key=True, autoincrement=False)
    last_started_at: Mapped[datetime] = mapped_column(
        Timestamp, nullable=False,
        comment="when the user's last consolidation was claimed (24 h cooldown)")

    @staticmethod
    def cooling_down(rows: Sequence[Row], now: datetime, cooldown: timedelta) -> bool:
        """From LAST_STARTED's rows: whether the user's last consolidation started less than
        `cooldown` ago — a read that lets most extractions skip the trigger's counts; `claim`
        still decides."""
        if not rows:
            return False
        last = rows[0][0]
        if isinstance(last, str):  # SQLite's raw driver gives the stored text back
            last = datetime.fromisoformat(last)
        started: datetime = last
        return started > now - cooldown

    @classmethod
    def claim(cls, user_id: int, now: datetime, cooldown: timedelta) -> bool:
        """Start a consolidation now if the last one started at least `cooldown` ago.

        Runs in the caller's transaction, which must commit (keep the claim) or roll back
        (give it back). A concurrent claimer waits on our row lock, or on our uncommitted
        first INSERT of the key, and then sees the claim taken.
        """
        moved = db.session.execute(
            sa.update(cls).where(cls.user_id == user_id, cls.last_started_at <= now - cooldown)
            .values(last_started_at=now).execution_options(synchronize_session=False))
        if affected(moved) == 1:
            return True
        if db.session.scalar(sa.select(cls.user_id).where(cls.user_id == user_id)) is not None:
            return False  # within the cooldown
        try:
            db.session.execute(sa.insert(cls).values(user_id=user_id, last_started_at=now))
        except IntegrityError:
            return False  # a concurrent first claim won
        return True


# When the user's last consolidation started (no row: never), for a batch (app.database.batches).
LAST_STARTED = (sa.select(ConsolidationState.last_started_at)
                .where(ConsolidationState.user_id == sa.bindparam("user_id")))


# One job's outcome row, for the unit of work to insert with the job's journal in one round trip.
OUTCOME_ROW = sa.insert(JobOutcome).values(
    {column.key: sa.bindparam(column.key) for column in table_of(JobOutcome).columns
     if column.key != "id"})
