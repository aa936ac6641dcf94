"""The one way to the database besides the ORM: prebuilt statements on pooled DB-API connections.

The platform calls two endpoints for every agent session: the context read when one starts and
the completion webhook when one ends. Through the ORM session each request paid a ping on
checkout, a ROLLBACK on return and the building of its statements — more than the statements'
own round trips (`bench.run context webhook`). Here a statement is built once at import (next to
its model), compiled once per dialect, and run on a raw connection of a pool that neither pings
nor resets:

- `reads`: AUTOCOMMIT connections, for the context read; nothing to end.
- `writes`: transactions that end in an explicit `commit()`, else a rollback, for the webhook.

A pooled connection the server dropped (a database restart) fails on the first statement; then
every idle connection of the pool is as dead, so the pool is emptied and that first statement is
run again on a new connection — nothing was sent before it. DB-API errors come out as
SQLAlchemy's, so callers catch IntegrityError as usual and the app answers 503 when the
database is down.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import sqlalchemy as sa
from flask import Flask, current_app
from sqlalchemy.engine import Dialect
from sqlalchemy.pool import PoolProxiedConnection
from sqlalchemy.sql import Executable

from app.extensions import db

EXTENSION = "rawdb"


@dataclass(frozen=True)
class Compiled:
    sql: str
    defaults: dict[str, Any]  # literal values the statement was built with (status, LIMIT…)
    order: tuple[str, ...] | None  # parameter order, for positional paramstyles (SQLite)

    def values(self, params: dict[str, Any]) -> dict[str, Any] | tuple:
        merged = {**self.defaults, **params}
        return tuple(merged[name] for name in self.order) if self.order is not None else merged


_compiled: dict[tuple[int, str], Compiled] = {}
# A module-level statement and its values.
Step = tuple[Executable, dict[str, Any]]


def compiled(statement: Executable, dialect: Dialect) -> Compiled:
    """`statement` compiled for `dialect`, once; statements must live at module level."""
    key = (id(statement), dialect.name)
    found = _compiled.get(key)
    if found is None:
        result = statement.compile(dialect=dialect)
        found = Compiled(str(result), dict(result.params),
                         tuple(result.positiontup) if result.positional else None)
        _compiled[key] = found
    return found


def _joined(cursor: Any, dialect: Dialect, steps: Sequence[Step]) -> str:
    """The steps as one multi-statement query, each statement's values escaped by the driver."""
    parts = []
    for statement, params in steps:
        statement_sql = compiled(statement, dialect)
        parts.append(cursor.mogrify(statement_sql.sql, statement_sql.values(params)))
    return ";\n".join(parts)


def _fetched(cursor: Any) -> list[tuple]:
    """The rows of the statement the cursor ran; for one that has none (INSERT, UPDATE,
    DELETE), one row: (rows affected, the id it inserted)."""
    if cursor.description is None:
        return [(cursor.rowcount, cursor.lastrowid)]
    return list(cursor.fetchall())


def _results(cursor: Any, dialect: Dialect, sql: str, count: int) -> list[list[tuple]]:
    """`_fetched` of each of `count` statements of a multi-statement query just sent."""
    results = [_fetched(cursor)]
    for _ in range(count - 1):
        try:
            cursor.nextset()
        except dialect.loaded_dbapi.Error as exc:
            raise _wrap(exc, dialect, sql) from exc
        results.append(_fetched(cursor))
    return results


def in_session(*steps: Step) -> list[list[tuple]]:
    """Several statements in one round trip inside the ORM session's transaction (the unit of
    work's): on its connection, as `Connection.batch` does on the pools'; one after the other
    through the session where there are no round trips to save (SQLite). `_fetched` of each."""
    connection = db.session.connection()
    dialect = connection.dialect
    if dialect.name == "sqlite":
        results = (connection.execute(statement, params) for statement, params in steps)
        return [list(result) if result.returns_rows else [(result.rowcount, result.lastrowid)]
                for result in results]
    cursor = connection.connection.dbapi_connection.cursor()
    sql = _joined(cursor, dialect, steps)
    try:
        try:
            cursor.execute(sql)
        except dialect.loaded_dbapi.Error as exc:
            raise _wrap(exc, dialect, sql) from exc
        return _results(cursor, dialect, sql, len(steps))
    finally:
        cursor.close()


def _wrap(exc: Exception, dialect: Dialect, sql: str | None = None, values: Any = None,
          invalidated: bool = False) -> Exception:
    """The SQLAlchemy exception for a DB-API one (IntegrityError, OperationalError, …)."""
    return sa.exc.DBAPIError.instance(sql, values, exc, dialect.loaded_dbapi.Error,
                                      dialect=dialect, connection_invalidated=invalidated)


class Pool:
    """Raw connections of one engine; `autocommit` says whether its connections need ending."""

    def __init__(self, engine: sa.Engine, *, autocommit: bool) -> None:
        self.engine = engine
        self.autocommit = autocommit

    def connection(self) -> Connection:
        return Connection(self)

    def dispose(self) -> None:
        self.engine.dispose()


class Connection:
    """`with pool.connection() as conn:` — statements on one pooled connection, given back at
    the end; on a transactional pool, what `commit()` did not end is rolled back."""

    def __init__(self, pool: Pool) -> None:
        self.pool = pool
        self.dialect = pool.engine.dialect
        self._error = self.dialect.loaded_dbapi.Error

    def __enter__(self) -> Connection:
        self._open()
        self._pending = False  # a transaction is open on a transactional pool
        self._fresh = True  # nothing sent on this connection yet
        return self

    def _open(self) -> None:
        try:
            self.raw: PoolProxiedConnection = self.pool.engine.raw_connection()
        except self._error as exc:
            raise _wrap(exc, self.dialect) from exc
        self.cursor = self.raw.cursor()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        try:
            if self.raw.is_valid:
                self.cursor.close()
                if self._pending:
                    self.raw.rollback()
        except self._error as rollback_error:
            # The connection died with the failure; the server rolls back on its own.
            self.raw.invalidate(rollback_error)
        finally:
            self.raw.close()

    def execute(self, statement: Executable, **params: Any) -> None:
        statement_sql = compiled(statement, self.dialect)
        self._send(statement_sql.sql, statement_sql.values(params))

    def _send(self, sql: str, values: Any) -> None:
        try:
            self.cursor.execute(sql, values)
        except self._error as exc:
            disconnected = self.dialect.is_disconnect(exc, self.raw, self.cursor)
            if disconnected:
                self.raw.invalidate(exc)
                if self._fresh:
                    # A pooled connection the server had dropped, and so had it every idle one
                    # of the pool: nothing was sent yet, so run it again on a new connection.
                    self.raw.close()
                    self.pool.dispose()
                    self._open()
                    self._fresh = False
                    self._send(sql, values)
                    return
            raise _wrap(exc, self.dialect, sql, values, invalidated=disconnected) from exc
        self._fresh = False
        self._pending = not self.pool.autocommit

    def batch(self, *steps: Step) -> list[list[tuple]]:
        """Several statements in one round trip — MySQL's multi-statement query, the values
        escaped by the driver as for any query — or one after the other where there are no
        round trips to save (SQLite). `_fetched` of each; the first failing statement raises and
        the rest are not run."""
        if self.dialect.name == "sqlite":
            return [self.rows(statement, **params) for statement, params in steps]
        sql = _joined(self.cursor, self.dialect, steps)
        self._send(sql, None)
        return _results(self.cursor, self.dialect, sql, len(steps))

    def rows(self, statement: Executable, **params: Any) -> list[tuple]:
        """Every row (`_fetched`), read to the end so no driver keeps the statement (or a
        SQLite lock)."""
        self.execute(statement, **params)
        return _fetched(self.cursor)

    def commit(self) -> None:
        try:
            self.raw.commit()
        except self._error as exc:
            raise _wrap(exc, self.dialect) from exc
        self._pending = False


@dataclass(frozen=True)
class RawDatabase:
    reads: Pool
    writes: Pool

    def dispose(self) -> None:
        self.reads.dispose()
        if self.writes.engine is not self.reads.engine:
            self.writes.dispose()


def init_app(app: Flask, orm_engine_options: dict[str, Any]) -> None:
    url = app.config["SQLALCHEMY_DATABASE_URI"]
    # No ping on checkout: the retry above covers a dropped connection for less.
    options = {k: v for k, v in orm_engine_options.items()
               if k not in ("isolation_level", "pool_pre_ping", "connect_args",
                            "pool_reset_on_return")}
    connect_args = dict(orm_engine_options.get("connect_args") or {})
    if url.startswith("sqlite"):
        reads = sa.create_engine(url, isolation_level="AUTOCOMMIT", pool_reset_on_return=None,
                                 connect_args=connect_args, **options)
        # One local file and no round trips: the webhook's transaction needs no pool of its
        # own, and SQLite's locking stays the ORM engine's.
        writes = sa.create_engine(url, connect_args=connect_args, **options)
    else:
        from pymysql.constants import CLIENT

        # Multi-statement queries for `batch`; FOUND_ROWS is what SQLAlchemy sets by default.
        connect_args = {**connect_args,
                        "client_flag": CLIENT.MULTI_STATEMENTS | CLIENT.FOUND_ROWS}
        reads = sa.create_engine(url, isolation_level="AUTOCOMMIT", pool_reset_on_return=None,
                                 connect_args=connect_args, **options)
        writes = sa.create_engine(
            url, pool_reset_on_return=None,
            isolation_level=orm_engine_options.get("isolation_level"),
            connect_args=connect_args,
            **options)
    app.extensions[EXTENSION] = RawDatabase(Pool(reads, autocommit=True),
                                            Pool(writes, autocommit=False))


def raw_database() -> RawDatabase:
    return current_app.extensions[EXTENSION]
