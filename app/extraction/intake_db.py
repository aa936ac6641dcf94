"""The webhook's transaction: prebuilt statements on a pooled DB-API connection.

Every finished task of the platform calls the webhook, so its database work skips the ORM:
the statements are built once at import and run through `rawsql` on a connection of a pool of
its own. That pool neither pings a connection on checkout nor rolls it back on return (two round
trips of the ORM's pool per request): every transaction here ends in an explicit commit or
rollback, and a connection the server dropped fails on the first statement, which is then
retried once on a fresh connection — nothing was written yet.
"""

from __future__ import annotations

from datetime import datetime
from types import TracebackType
from typing import Any

import sqlalchemy as sa
from flask import Flask, current_app
from sqlalchemy.dialects import mysql, sqlite
from sqlalchemy.sql import Executable

from app import rawsql
from app.auth.models import User
from app.extensions import db
from app.extraction.models import WebhookEvent
from app.memory.models import UserMemoryPreference
from app.sessions.models import PlatformSession

_event = WebhookEvent.__table__
_session = PlatformSession.__table__
_SESSION_FIELDS = ("user_id", "project_key", "workspace", "session_type", "channel",
                   "last_seen_at")

# Whether the user exists, and their D9 toggle, in one round trip.
USER_AND_TOGGLE = (
    sa.select(User.id, UserMemoryPreference.auto_capture_enabled)
    .outerjoin(UserMemoryPreference, UserMemoryPreference.user_id == User.id)
    .where(User.id == sa.bindparam("user_id"))
)
INSERT_EVENT = sa.insert(_event).values(
    {name: sa.bindparam(name) for name in ("event_id", "session_id", "user_id", "phase",
                                           "reason", "received_at")})
SET_EVENT_REASON = (sa.update(_event).where(_event.c.event_id == sa.bindparam("key"))
                    .values(reason=sa.bindparam("new_reason")))


def _upserts() -> dict[str, Executable]:
    """One statement per dialect family, so two first reports of a session cannot collide."""
    values = {name: sa.bindparam(name) for name in ("id", *_SESSION_FIELDS)}
    on_sqlite = sqlite.insert(_session).values(values)
    on_mysql = mysql.insert(_session).values(values)
    return {
        "sqlite": on_sqlite.on_conflict_do_update(
            index_elements=[_session.c.id],
            set_={name: on_sqlite.excluded[name] for name in _SESSION_FIELDS}),
        "mysql": on_mysql.on_duplicate_key_update(
            {name: on_mysql.inserted[name] for name in _SESSION_FIELDS}),
    }


UPSERT_SESSION = _upserts()

def timestamp(value: datetime) -> str:
    """DATETIME(6) text both MySQL and SQLite store as is (SQLAlchemy's SQLite format)."""
    return value.isoformat(sep=" ", timespec="microseconds")


EXTENSION = "intake_pool"


def init_app(app: Flask) -> None:
    """The webhook's pool; SQLite (one local file, no round trips) shares the app's engine."""
    url = app.config["SQLALCHEMY_DATABASE_URI"]
    if url.startswith("sqlite"):
        app.extensions[EXTENSION] = None
        return
    options = {k: v for k, v in app.config["SQLALCHEMY_ENGINE_OPTIONS"].items()
               if k != "pool_pre_ping"}
    app.extensions[EXTENSION] = sa.create_engine(url, pool_reset_on_return=None, **options)


def _engine() -> sa.Engine:
    return current_app.extensions[EXTENSION] or db.engine


class IntakeTransaction:
    """`with IntakeTransaction() as tx:` — committed by `tx.commit()`, else rolled back."""

    def __init__(self) -> None:
        self.engine = _engine()
        self.dialect = self.engine.dialect
        self._error = self.dialect.loaded_dbapi.Error

    def __enter__(self) -> IntakeTransaction:
        self._open()
        self._committed = False
        self._fresh = True  # nothing sent on this connection yet
        return self

    def _open(self) -> None:
        self.connection = rawsql.connect(self.engine)
        self.cursor = self.connection.cursor()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        try:
            if self.connection.is_valid:
                self.cursor.close()
                if not self._committed:
                    self.connection.rollback()
        except self._error as rollback_error:
            # The connection died with the failure; the server rolls back on its own.
            self.connection.invalidate(rollback_error)
        finally:
            self.connection.close()

    def upsert_session(self, **values: Any) -> None:
        family = "sqlite" if self.dialect.name == "sqlite" else "mysql"
        self.execute(UPSERT_SESSION[family], **values)

    def execute(self, statement: Executable, **params: Any) -> None:
        statement_sql = rawsql.compiled(statement, self.dialect)
        values = statement_sql.values(params)
        try:
            self.cursor.execute(statement_sql.sql, values)
        except self._error as exc:
            disconnected = self.dialect.is_disconnect(exc, self.connection, self.cursor)
            if disconnected:
                self.connection.invalidate(exc)
                if self._fresh:
                    # A pooled connection the server had dropped, and so had it every idle one
                    # of the pool: nothing was written, retry on a new connection.
                    self.connection.close()
                    self.engine.dispose()
                    self._open()
                    self._fresh = False
                    self.execute(statement, **params)
                    return
            raise rawsql.wrap(exc, self.dialect, statement_sql.sql, values,
                              invalidated=disconnected) from exc
        self._fresh = False

    def first(self, statement: Executable, **params: Any) -> tuple | None:
        self.execute(statement, **params)
        # Read to the end, so no driver keeps the statement (and SQLite its read lock) open.
        rows = self.cursor.fetchall()
        return tuple(rows[0]) if rows else None

    def commit(self) -> None:
        try:
            self.connection.commit()
        except self._error as exc:
            raise rawsql.wrap(exc, self.dialect) from exc
        self._committed = True
