"""Who read a user's memories (SPEC §8 Audit transparency).

Every audit read — an auditor's list of a user's memories or a memory's history, by the API or
the audit page — is one row, committed before the memories are shown. The user sees their own
rows; admins see all.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import aliased

from app.auth.models import User
from app.database.conflicts import retry_conflicts
from app.db_types import iso, utcnow
from app.extensions import db
from app.memory.models import MemoryAccess
from app.paging import Page, PageRequest, paginate
from app.unit_of_work import UnitOfWork


class Read(StrEnum):
    LIST = "LIST"  # the list of the user's memories
    HISTORY = "HISTORY"  # one memory's history


@retry_conflicts
def record(viewer_id: int, subject_user_id: int, what: Read,
           memory_id: int | None = None) -> None:
    """One audit read, committed on its own: it stays even when the read then fails."""
    with UnitOfWork() as uow:
        db.session.add(MemoryAccess(viewer_id=viewer_id, subject_user_id=subject_user_id,
                                    what=what.value, memory_id=memory_id, at=utcnow()))
        uow.commit()


@dataclass(frozen=True)
class Access:
    at: datetime
    viewer_id: int
    viewer_name: str | None
    subject_id: int
    subject_name: str | None
    what: Read
    memory_id: int | None

    @property
    def description(self) -> str:
        """What was read, in the API's words."""
        if self.what is Read.HISTORY:
            return f"history of memory #{self.memory_id}"
        return "memory list"

    def to_dict(self, *, with_subject: bool = False) -> dict[str, Any]:
        record = {"at": iso(self.at),
                  "viewer": {"id": self.viewer_id, "username": self.viewer_name},
                  "what": self.description}
        if with_subject:
            record["subject"] = {"id": self.subject_id, "username": self.subject_name}
        return record


def page(request: PageRequest, subject_user_id: int | None = None) -> Page[Access]:
    """Newest first; one user's reads, or everyone's."""
    viewer, subject = aliased(User), aliased(User)
    statement = (
        sa.select(MemoryAccess.at, MemoryAccess.viewer_id, viewer.username,
                  MemoryAccess.subject_user_id, subject.username, MemoryAccess.what,
                  MemoryAccess.memory_id)
        .outerjoin(viewer, viewer.id == MemoryAccess.viewer_id)
        .outerjoin(subject, subject.id == MemoryAccess.subject_user_id)
        .order_by(MemoryAccess.id.desc()))
    if subject_user_id is not None:
        statement = statement.where(MemoryAccess.subject_user_id == subject_user_id)
    rows = paginate(statement, request, scalars=False)
    return Page([Access(at, vid, vname, sid, sname, Read(what), mid)
                 for at, vid, vname, sid, sname, what, mid in rows.records],
                rows.total, rows.current, rows.size)
