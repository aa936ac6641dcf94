"""A connection pool for the hottest read-only queries (the platform's context read).

The ORM session path costs two extra round trips per request (a pre-ping on checkout and a
ROLLBACK on return) plus statement building; for a read that every new agent session makes,
that is most of the time spent. Here prebuilt statements (`rawsql`) run on an autocommit
connection that needs no reset. A connection the server dropped empties the pool and the read is
retried once on a fresh connection, so a database restart never fails the request that finds it.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from flask import Flask, current_app
from sqlalchemy.sql import Executable

from app import rawsql

EXTENSION = "readpool"


Query = tuple[Executable, dict[str, Any]]


class ReadPool:
    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine

    def rows(self, *queries: Query) -> list[list[tuple]]:
        """All rows of each module-level statement, with its bind parameters filled in, run on
        one connection."""
        dialect = self.engine.dialect
        prepared = []
        for statement, params in queries:
            statement_sql = rawsql.compiled(statement, dialect)
            prepared.append((statement_sql, statement_sql.values(params)))
        for attempt in (1, 2):
            connection = rawsql.connect(self.engine)
            cursor = None
            sql, values = None, None
            try:
                cursor = connection.cursor()
                results = []
                for statement_sql, values in prepared:
                    sql = statement_sql.sql
                    cursor.execute(sql, values)
                    results.append(list(cursor.fetchall()))
                cursor.close()
                connection.close()
                return results
            except dialect.loaded_dbapi.Error as exc:
                disconnected = dialect.is_disconnect(exc, connection, cursor)
                if disconnected:
                    connection.invalidate(exc)
                    # The server went away: every idle connection of the pool is as dead as
                    # this one, so the retry must not take another of them.
                    self.engine.dispose()
                else:
                    connection.close()
                if not disconnected or attempt == 2:
                    raise rawsql.wrap(exc, dialect, sql, values,
                                      invalidated=disconnected) from exc
        raise AssertionError("unreachable")


def init_app(app: Flask) -> None:
    options = {k: v for k, v in app.config["SQLALCHEMY_ENGINE_OPTIONS"].items()
               if k not in ("isolation_level", "pool_pre_ping")}
    engine = sa.create_engine(app.config["SQLALCHEMY_DATABASE_URI"],
                              isolation_level="AUTOCOMMIT", pool_reset_on_return=None,
                              **options)
    app.extensions[EXTENSION] = ReadPool(engine)


def read_many(*queries: Query) -> list[list[tuple]]:
    """Run several read-only statements on one connection of the read pool."""
    return current_app.extensions[EXTENSION].rows(*queries)
