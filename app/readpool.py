"""A connection pool for the hottest read-only queries (the platform's context read).

The ORM session path costs two extra round trips per request (a pre-ping on checkout and a
ROLLBACK on return) plus statement building; for a read that every new agent session makes,
that is most of the time spent. Here statements are built once, compiled once per dialect,
and run on an autocommit connection that needs no reset. A connection the server dropped is
retried once on a fresh one, so a killed connection never fails the request that finds it.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from flask import Flask, current_app
from sqlalchemy.sql import Executable

EXTENSION = "readpool"


class ReadPool:
    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine
        self._compiled: dict[int, tuple[str, dict[str, Any], tuple[str, ...] | None]] = {}

    def _compile(self, statement: Executable) -> tuple[str, dict[str, Any], tuple[str, ...] | None]:
        key = id(statement)
        cached = self._compiled.get(key)
        if cached is None:
            compiled = statement.compile(dialect=self.engine.dialect)
            order = tuple(compiled.positiontup) if compiled.positional else None
            cached = (str(compiled), dict(compiled.params), order)
            self._compiled[key] = cached
        return cached

    def rows(self, statement: Executable, **params: Any) -> list[tuple]:
        """All rows of a module-level statement, with its bind parameters filled in."""
        sql, defaults, order = self._compile(statement)
        values: dict[str, Any] | tuple = {**defaults, **params}
        if order is not None:
            values = tuple(values[name] for name in order)
        dbapi_error = self.engine.dialect.loaded_dbapi.Error
        for attempt in (1, 2):
            try:
                connection = self.engine.raw_connection()
            except dbapi_error as exc:
                # The pool hands out DB-API errors unwrapped; the app maps SQLAlchemy's to 503.
                raise sa.exc.DBAPIError.instance(None, None, exc, dbapi_error,
                                                 dialect=self.engine.dialect) from exc
            cursor = None
            try:
                cursor = connection.cursor()
                cursor.execute(sql, values)
                result = cursor.fetchall()
                cursor.close()
                connection.close()
                return list(result)
            except dbapi_error as exc:
                disconnected = self.engine.dialect.is_disconnect(exc, connection, cursor)
                if disconnected:
                    connection.invalidate(exc)
                else:
                    connection.close()
                if not disconnected or attempt == 2:
                    raise sa.exc.DBAPIError.instance(
                        sql, values, exc, dbapi_error, dialect=self.engine.dialect,
                        connection_invalidated=disconnected) from exc
        raise AssertionError("unreachable")


def init_app(app: Flask) -> None:
    options = {k: v for k, v in app.config["SQLALCHEMY_ENGINE_OPTIONS"].items()
               if k not in ("isolation_level", "pool_pre_ping")}
    engine = sa.create_engine(app.config["SQLALCHEMY_DATABASE_URI"],
                              isolation_level="AUTOCOMMIT", pool_reset_on_return=None,
                              **options)
    app.extensions[EXTENSION] = ReadPool(engine)


def read_rows(statement: Executable, **params: Any) -> list[tuple]:
    """Run a read-only statement on the app's read pool."""
    return current_app.extensions[EXTENSION].rows(statement, **params)
