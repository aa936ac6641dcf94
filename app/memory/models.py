"""memory_item and user_memory_preference (seed §5.1), the journal of their changes and the log
of who read them. Their SQL is in `repository`, `journal` and `access_log`."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from app.db_types import BigId, ProjectKey, Timestamp, iso, utcnow
from app.extensions import Model
from app.memory.rules import Scope


class MemoryItem(Model):
    __tablename__ = "memory_item"
    # Each read filters on a prefix of one of these and orders by (updated_at, id): with the
    # trailing updated_at (and InnoDB's implicit id) the order comes from the index, no filesort.
    __table_args__ = (
        sa.UniqueConstraint("user_id", "dedup_hash", name="uk_memory_dedup"),
        sa.Index("idx_memory_user", "user_id", "scope", "status", "updated_at"),
        sa.Index("idx_memory_project", "user_id", "project_key", "status", "updated_at"),
        sa.Index("idx_memory_user_status", "user_id", "status", "updated_at"),
        sa.Index("idx_memory_user_updated", "user_id", "updated_at"),
    )

    # The ORM names a row by (user_id, id): the UPDATE of a flush and the reload after a commit
    # then carry the user id, as every statement on a per-user table does (sharding by user,
    # docs/scaling.md). The table's key stays `id`.
    __mapper_args__ = {"primary_key": ["user_id", "id"]}

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    user_id: Mapped[int] = mapped_column(sa.BigInteger, nullable=False)
    scope: Mapped[str] = mapped_column(sa.String(16), nullable=False, comment="USER/PROJECT")
    project_key: Mapped[str] = mapped_column(
        ProjectKey, nullable=False, default="", server_default="",
        comment="PROJECT: the session projectKey; USER: empty string")
    content: Mapped[str] = mapped_column(sa.Text, nullable=False)
    source: Mapped[str] = mapped_column(sa.String(16), nullable=False, default="MANUAL",
                                        server_default="MANUAL",
                                        comment="AUTO/MANUAL/CONSOLIDATED")
    status: Mapped[str] = mapped_column(sa.String(16), nullable=False, default="ACTIVE",
                                        server_default="ACTIVE", comment="ACTIVE/DISMISSED")
    dedup_hash: Mapped[str] = mapped_column(
        sa.CHAR(40), nullable=False, comment="SHA-1(scope|project_key|normalized content)")
    # Raised on every change of content, status, scope or project key, by anyone; a touch
    # leaves it (SPEC §11): what ETag/If-Match and a job's version-checked actions compare.
    version: Mapped[int] = mapped_column(sa.Integer, nullable=False, default=1,
                                         server_default="1")
    origin_session_id: Mapped[int | None] = mapped_column(
        sa.BigInteger, comment="session an AUTO row was extracted from")
    created_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow, nullable=False)
    updated_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow, nullable=False)

    def to_dict(self) -> dict[str, Any]:
        """The item shape of SPEC §4."""
        return {
            "id": self.id,
            "userId": self.user_id,
            "scope": self.scope,
            "projectKey": self.project_key if self.scope == Scope.PROJECT else None,
            "content": self.content,
            "source": self.source,
            "status": self.status,
            "version": self.version,
            "originSessionId": self.origin_session_id,
            "createdAt": iso(self.created_at),
            "updatedAt": iso(self.updated_at),
        }


class UserMemoryPreference(Model):
    """The single auto-capture switch of a user (D9). No row means OFF."""

    __tablename__ = "user_memory_preference"

    user_id: Mapped[int] = mapped_column(sa.BigInteger, primary_key=True, autoincrement=False)
    auto_capture_enabled: Mapped[bool] = mapped_column(sa.Boolean, nullable=False, default=False)
    created_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow, nullable=False)
    updated_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow, nullable=False)


class MemoryEvent(Model):
    """One change of a memory (SPEC §8 Provenance), written by `journal` with the change."""

    __tablename__ = "memory_event"
    __table_args__ = (sa.Index("idx_memory_event_memory", "memory_id", "id"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    memory_id: Mapped[int] = mapped_column(sa.BigInteger, nullable=False)
    user_id: Mapped[int] = mapped_column(sa.BigInteger, nullable=False)
    type: Mapped[str] = mapped_column(
        sa.String(16), nullable=False,
        comment="CREATED/EDITED/TOUCHED/UPDATED/DISMISSED/RESTORED/DEMOTED/CONSOLIDATED")
    actor: Mapped[str] = mapped_column(sa.String(16), nullable=False,
                                       comment="USER/EXTRACTION/CONSOLIDATION")
    session_id: Mapped[int | None] = mapped_column(
        sa.BigInteger, comment="the platform session that caused it; NULL for the user's own")
    before: Mapped[str | None] = mapped_column(
        sa.Text, comment="content before; CONSOLIDATED: JSON array of the merged contents")
    after: Mapped[str | None] = mapped_column(sa.Text, comment="content after")
    at: Mapped[datetime] = mapped_column(Timestamp, nullable=False)


class MemoryAccess(Model):
    """One audit read of a user's memories (SPEC §8 Audit transparency)."""

    __tablename__ = "memory_access_log"
    __table_args__ = (sa.Index("idx_memory_access_subject", "subject_user_id", "id"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    viewer_id: Mapped[int] = mapped_column(sa.BigInteger, nullable=False)
    subject_user_id: Mapped[int] = mapped_column(sa.BigInteger, nullable=False)
    what: Mapped[str] = mapped_column(sa.String(16), nullable=False, comment="LIST/HISTORY")
    memory_id: Mapped[int | None] = mapped_column(sa.BigInteger,
                                                  comment="HISTORY: the memory")
    at: Mapped[datetime] = mapped_column(Timestamp, nullable=False)
