"""memory_item and user_memory_preference (seed §5.1), with the SQL that reads them."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from app.db_types import BigId, ProjectKey, Timestamp, iso, utcnow
from app.extensions import db
from app.memory.rules import (
    ACTIVE_PER_USER_MAX,
    INJECT_PROJECT_MAX,
    INJECT_USER_MAX,
    MACHINE_SOURCES,
    NEGATIVE_SET_MAX,
    Scope,
    Status,
)
from app.readpool import read_many


class MemoryItem(db.Model):
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
            "originSessionId": self.origin_session_id,
            "createdAt": iso(self.created_at),
            "updatedAt": iso(self.updated_at),
        }

    # ---- reads -------------------------------------------------------------------------

    @classmethod
    def owned(cls, user_id: int, item_id: int, *, for_update: bool = False) -> MemoryItem | None:
        """The item when it belongs to the user; another user's item is simply absent (D4).

        `for_update` locks the row until commit, so a job deleting it meanwhile either waits
        for us or has already made it absent.
        """
        query = sa.select(cls).where(cls.id == item_id, cls.user_id == user_id)
        return db.session.scalar(query.with_for_update() if for_update else query)

    @classmethod
    def delete_owned(cls, user_id: int, item_id: int) -> bool:
        """Delete the user's item in one statement; False when there was none (any more)."""
        result = db.session.execute(
            sa.delete(cls).where(cls.id == item_id, cls.user_id == user_id)
            .execution_options(synchronize_session=False))
        return result.rowcount == 1

    @classmethod
    def by_hash(cls, user_id: int, dedup_hash: str) -> MemoryItem | None:
        return db.session.scalar(
            sa.select(cls).where(cls.user_id == user_id, cls.dedup_hash == dedup_hash)
        )

    @classmethod
    def count_active(cls, user_id: int) -> int:
        return db.session.scalar(
            sa.select(sa.func.count()).select_from(cls)
            .where(cls.user_id == user_id, cls.status == Status.ACTIVE)
        ) or 0

    @classmethod
    def page(
        cls,
        user_id: int,
        *,
        scope: str | None = None,
        project_key: str | None = None,
        status: str | None = None,
        page: int = 1,
        size: int = 20,
    ) -> tuple[Sequence[MemoryItem], int]:
        """One page of a user's items, newest first, and the total matching."""
        conditions = [cls.user_id == user_id]
        if scope is not None:
            conditions.append(cls.scope == scope)
        if project_key is not None:
            conditions.append(cls.project_key == project_key)
        if status is not None:
            conditions.append(cls.status == status)
        total = db.session.scalar(sa.select(sa.func.count()).select_from(cls).where(*conditions))
        rows = db.session.scalars(
            sa.select(cls).where(*conditions)
            .order_by(cls.updated_at.desc(), cls.id.desc())
            .offset((page - 1) * size).limit(size)
        ).all()
        return rows, total or 0

    @classmethod
    def injection_rows(cls, user_id: int, project_key: str | None) -> list[tuple]:
        """(scope, project_key, content) to inject: PROJECT rows first, then USER, newest first.

        Each group is its own index range scan (idx_memory_project / idx_memory_user), run on
        the read pool: this is the read every new agent session waits for.
        """
        user_rows = (_INJECT_USER_ROWS, {"user_id": user_id})
        if project_key is None:
            return read_many(user_rows)[0]
        project_rows, user_rows = read_many(
            (_INJECT_PROJECT_ROWS, {"user_id": user_id, "project_key": project_key}), user_rows)
        return project_rows + user_rows

    # ---- extraction (D13, D14) ---------------------------------------------------------
    # Each group read is one index range scan: the USER group on idx_memory_user, a project
    # group on idx_memory_project (a non-empty project_key only ever belongs to PROJECT rows).

    @classmethod
    def _group(cls, user_id: int, project_key: str | None, status: Status) -> list[Any]:
        """Conditions of one group: USER when project_key is None, else that project."""
        if project_key is None:
            return [cls.user_id == user_id, cls.scope == Scope.USER.value,
                    cls.status == status.value]
        return [cls.user_id == user_id, cls.project_key == project_key,
                cls.status == status.value]

    @classmethod
    def machine_made(cls) -> sa.ColumnElement[bool]:
        """AUTO or CONSOLIDATED: the rows extraction and consolidation may match, rewrite,
        demote or merge (D13-D15). A MANUAL row is never one of them."""
        return cls.source.in_([s.value for s in MACHINE_SOURCES])

    @classmethod
    def comparison_set(cls, user_id: int, project_key: str | None) -> list[sa.Row]:
        """(id, scope, project_key, content) the model may match (D13): machine-made ACTIVE rows
        of the USER group and, for a valid project key, of that project's group.

        MANUAL rows never appear (a user's own words are never matched or rewritten) and
        DISMISSED rows are the negative set, shown without ids.
        """
        columns = (cls.id, cls.scope, cls.project_key, cls.content)
        machine = cls.machine_made()
        rows: list[sa.Row] = []
        for key in (None,) if project_key is None else (None, project_key):
            rows.extend(db.session.execute(
                sa.select(*columns).where(*cls._group(user_id, key, Status.ACTIVE), machine)
                .order_by(cls.updated_at.desc(), cls.id.desc()).limit(ACTIVE_PER_USER_MAX)
            ))
        return rows

    @classmethod
    def negative_set(cls, user_id: int, project_key: str | None,
                     limit: int = NEGATIVE_SET_MAX) -> list[str]:
        """Contents of the newest DISMISSED rows of the same groups (D13), at most `limit`."""
        rows: list[sa.Row] = []
        for key in (None,) if project_key is None else (None, project_key):
            rows.extend(db.session.execute(
                sa.select(cls.content, cls.updated_at, cls.id)
                .where(*cls._group(user_id, key, Status.DISMISSED))
                .order_by(cls.updated_at.desc(), cls.id.desc()).limit(limit)
            ))
        rows.sort(key=lambda r: (r.updated_at, r.id), reverse=True)
        return [r.content for r in rows[:limit]]

    @classmethod
    def stale_machine_row(cls, user_id: int, project_key: str | None,
                          exclude_ids: Collection[int] = ()) -> int | None:
        """Id of the oldest-updated machine-made ACTIVE row of one group: what D14 demotes.

        MANUAL rows are never candidates; `exclude_ids` keeps a run from demoting rows it has
        just written or confirmed.
        """
        conditions = [*cls._group(user_id, project_key, Status.ACTIVE),
                      cls.machine_made()]
        if exclude_ids:
            conditions.append(cls.id.not_in(list(exclude_ids)))
        return db.session.scalar(
            sa.select(cls.id).where(*conditions)
            .order_by(cls.updated_at.asc(), cls.id.asc()).limit(1)
        )

    # ---- consolidation (D15) -----------------------------------------------------------

    @classmethod
    def group_active_counts(cls, user_id: int, project_key: str | None) -> tuple[int, int]:
        """(machine-made, other) ACTIVE rows of one group: its size against the D15 target,
        and how much of it consolidation may work on."""
        machine = cls.machine_made()
        total, machine_rows = db.session.execute(
            sa.select(sa.func.count(), sa.func.sum(sa.case((machine, 1), else_=0)))
            .where(*cls._group(user_id, project_key, Status.ACTIVE))
        ).one()
        machine_rows = int(machine_rows or 0)
        return machine_rows, int(total or 0) - machine_rows

    @classmethod
    def consolidation_inputs(cls, user_id: int, project_key: str | None) -> list[sa.Row]:
        """(id, content, dedup_hash) of a group's machine-made ACTIVE rows, newest first: all
        that a consolidation may read. MANUAL and DISMISSED rows never appear."""
        return list(db.session.execute(
            sa.select(cls.id, cls.content, cls.dedup_hash)
            .where(*cls._group(user_id, project_key, Status.ACTIVE),
                   cls.machine_made())
            .order_by(cls.updated_at.desc(), cls.id.desc())
        ))

    # ---- the add form's project picker -------------------------------------------------

    @classmethod
    def project_keys_in_use(cls, user_id: int) -> list[str]:
        """Distinct project keys the user has memories under, any status. A non-empty
        project_key only ever belongs to PROJECT rows: one range of idx_memory_project."""
        return list(db.session.scalars(
            sa.select(cls.project_key).distinct()
            .where(cls.user_id == user_id, cls.project_key != "")
        ))


_NEWEST_FIRST = (MemoryItem.updated_at.desc(), MemoryItem.id.desc())
_INJECT_COLUMNS = (MemoryItem.scope, MemoryItem.project_key, MemoryItem.content)
_INJECT_USER_ROWS = (
    sa.select(*_INJECT_COLUMNS)
    .where(MemoryItem.user_id == sa.bindparam("user_id"), MemoryItem.scope == Scope.USER.value,
           MemoryItem.status == Status.ACTIVE.value)
    .order_by(*_NEWEST_FIRST).limit(INJECT_USER_MAX)
)
# A non-empty project_key only ever belongs to PROJECT rows.
_INJECT_PROJECT_ROWS = (
    sa.select(*_INJECT_COLUMNS)
    .where(MemoryItem.user_id == sa.bindparam("user_id"),
           MemoryItem.project_key == sa.bindparam("project_key"),
           MemoryItem.status == Status.ACTIVE.value)
    .order_by(*_NEWEST_FIRST).limit(INJECT_PROJECT_MAX)
)


class UserMemoryPreference(db.Model):
    """The single auto-capture switch of a user (D9). No row means OFF."""

    __tablename__ = "user_memory_preference"

    user_id: Mapped[int] = mapped_column(sa.BigInteger, primary_key=True, autoincrement=False)
    auto_capture_enabled: Mapped[bool] = mapped_column(sa.Boolean, nullable=False, default=False)
    created_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow, nullable=False)
    updated_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow, nullable=False)

    @classmethod
    def auto_capture_enabled_for(cls, user_id: int) -> bool:
        enabled = db.session.scalar(
            sa.select(cls.auto_capture_enabled).where(cls.user_id == user_id)
        )
        return bool(enabled)
