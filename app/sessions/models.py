"""The platform's sessions, as reported by the completion webhook."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from app.db_types import Timestamp, prebuilt_upserts, project_key_type, utcnow
from app.extensions import Model, db
from app.keys import valid_project_key


class PlatformSession(Model):
    __tablename__ = "session"
    __table_args__ = (sa.Index("idx_session_user_project", "user_id", "project_key"),)

    id: Mapped[int] = mapped_column(sa.BigInteger, primary_key=True, autoincrement=False)
    user_id: Mapped[int] = mapped_column(sa.BigInteger, nullable=False)
    # Stored as reported (up to 255); only keys that pass valid_project_key count as projects.
    project_key: Mapped[str | None] = mapped_column(project_key_type(255))
    workspace: Mapped[str | None] = mapped_column(sa.String(512))
    session_type: Mapped[str | None] = mapped_column(sa.String(32))
    channel: Mapped[str | None] = mapped_column(sa.String(32))
    last_seen_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow, nullable=False)

    @classmethod
    def project_keys(cls, user_id: int, bot_keys: Iterable[str]) -> list[str]:
        """Distinct real project keys of the user's sessions, sorted (bot keys left out)."""
        keys = db.session.scalars(
            sa.select(cls.project_key).distinct()
            .where(cls.user_id == user_id, cls.project_key.is_not(None), cls.project_key != "")
        )
        return sorted({k for k in keys if valid_project_key(k, bot_keys) == k})

    @classmethod
    def projects_of(cls, user_id: int, session_ids: Iterable[int]) -> dict[int, str | None]:
        """The reported project key of each of the user's sessions among `session_ids`."""
        ids = set(session_ids)
        if not ids:
            return {}
        rows = db.session.execute(sa.select(cls.id, cls.project_key)
                                  .where(cls.user_id == user_id, cls.id.in_(ids)))
        return {session_id: key or None for session_id, key in rows}


SESSION_FIELDS = ("user_id", "project_key", "workspace", "session_type", "channel",
                  "last_seen_at")
# The webhook's statement (raw write pool): two first reports of a session cannot collide.
UPSERT_SESSION = prebuilt_upserts(PlatformSession.__table__, ("id", *SESSION_FIELDS),
                                  update=SESSION_FIELDS)
