"""Typed reads, sent several in one round trip.

A `Read[T]` is one thing the code wants from the database: its statement(s), their values, and
the decoder that makes their rows a `T` — written together, next to the model it queries.
`batch(connection, a, b, …)` sends the statements of all of them in one round trip where MySQL
allows (its multi-statement query, each statement's values escaped by the driver) or one after
the other through SQLAlchemy where there are no round trips to save (SQLite), and returns each
read's value, typed: nothing is joined by position outside this module. A write in a batch is
read back as what it changed (`written`: rows affected, the id it inserted).

The statements are compiled once per dialect and statement object; the cache holds the object
weakly, so a statement built per call is compiled per call and never answered with another's
SQL. Statements the hot paths send are built once, at import.

Every batch runs in the connection's transaction, which SQLAlchemy opens and ends
(`engine.begin()`, the ORM session's), never by bookkeeping of ours, or on an AUTOCOMMIT
connection (`AUTOCOMMIT`), where there is none.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, NamedTuple, TypeVar, cast, overload

import sqlalchemy as sa
from sqlalchemy.engine import Dialect
from sqlalchemy.sql import ClauseElement, Executable
from sqlalchemy.sql.compiler import SQLCompiler

from app import tracing
from app.database.pools import FAILED, note

# The execution option that marks an AUTOCOMMIT engine's connections: nothing to begin or end.
AUTOCOMMIT = "memory_autocommit"

Row = tuple[Any, ...]
Rows = list[Row]
# One statement of a read and its values.
Step = tuple[Executable, Mapping[str, Any]]

T = TypeVar("T")
A = TypeVar("A")
B = TypeVar("B")
C = TypeVar("C")
D = TypeVar("D")


@dataclass(frozen=True, eq=False)
class Read(Generic[T]):
    """Statements, their values, and what makes their rows (one list per statement) a `T`."""

    steps: tuple[Step, ...]
    decode: Callable[[Sequence[Rows]], T]


def read(statement: Executable, values: Mapping[str, Any],
         decode: Callable[[Rows], T]) -> Read[T]:
    """A read of one statement whose rows `decode` makes a `T`."""
    return Read(((statement, values),), lambda results: decode(results[0]))


def rows(statement: Executable, values: Mapping[str, Any]) -> Read[Rows]:
    """The rows of one statement, as they come."""
    return read(statement, values, list)


class Written(NamedTuple):
    """What a write changed."""

    rowcount: int
    lastrowid: int | None


def written(statement: Executable, values: Mapping[str, Any]) -> Read[Written]:
    """A write (INSERT, UPDATE, DELETE) in a batch, read back as what it changed."""
    return read(statement, values, lambda found: Written(*found[0]))


def affected(result: sa.Result[Any]) -> int:
    """The rows an UPDATE or DELETE run through the ORM session changed: SQLAlchemy types
    `Session.execute`'s answer as any result, and a DML statement's is a cursor's."""
    return cast(sa.CursorResult[Any], result).rowcount


@dataclass(frozen=True)
class Compiled:
    sql: str
    defaults: dict[str, Any]  # literal values the statement was built with (status, LIMIT…)
    order: tuple[str, ...] | None  # parameter order, for positional paramstyles (SQLite)

    def values(self, params: Mapping[str, Any]) -> dict[str, Any] | tuple[Any, ...]:
        merged = {**self.defaults, **params}
        return tuple(merged[name] for name in self.order) if self.order is not None else merged


# Per statement object (held weakly: gone with it), per dialect name.
_compiled: weakref.WeakKeyDictionary[Executable, dict[str, Compiled]] = (
    weakref.WeakKeyDictionary())


def compiled(statement: Executable, dialect: Dialect) -> Compiled:
    """`statement` compiled for `dialect`, once per statement object."""
    per_dialect = _compiled.get(statement)
    if per_dialect is None:
        per_dialect = _compiled.setdefault(statement, {})
    found = per_dialect.get(dialect.name)
    if found is None:
        assert isinstance(statement, ClauseElement)  # every Executable we build is one
        result = statement.compile(dialect=dialect)
        assert isinstance(result, SQLCompiler)  # a statement's, not a DDL's
        found = Compiled(str(result), dict(result.params),
                         tuple(result.positiontup or ()) if result.positional else None)
        per_dialect[dialect.name] = found
    return found


@overload
def batch(connection: sa.Connection, a: Read[A], /) -> tuple[A]: ...
@overload
def batch(connection: sa.Connection, a: Read[A], b: Read[B], /) -> tuple[A, B]: ...
@overload
def batch(connection: sa.Connection, a: Read[A], b: Read[B], c: Read[C], /
          ) -> tuple[A, B, C]: ...
@overload
def batch(connection: sa.Connection, a: Read[A], b: Read[B], c: Read[C], d: Read[D], /
          ) -> tuple[A, B, C, D]: ...


def batch(connection: sa.Connection, *reads: Read[Any]) -> tuple[Any, ...]:
    """The value of each read, its statements sent with the others' in one round trip (see the
    module). The first failing statement raises (as SQLAlchemy's exception) and the rest are
    not run."""
    return tuple(batch_all(connection, reads))


def batch_all(connection: sa.Connection, reads: Sequence[Read[T]]) -> list[T]:
    """`batch` of any number of reads of one type."""
    results = run(connection, [step for each in reads for step in each.steps])
    values, start = [], 0
    for each in reads:
        end = start + len(each.steps)
        values.append(each.decode(results[start:end]))
        start = end
    return values


def _fetched(cursor: Any) -> Rows:
    """The rows of the statement the cursor ran; for one that has none (INSERT, UPDATE,
    DELETE), one row: (rows affected, the id it inserted)."""
    if cursor.description is None:
        return [(cursor.rowcount, cursor.lastrowid)]
    return list(cursor.fetchall())


def run(connection: sa.Connection, steps: Sequence[Step]) -> list[Rows]:
    """The rows of each statement (`_fetched`), all sent in one round trip where the dialect
    allows: what every batch sends goes through here."""
    dialect = connection.dialect
    if not connection.in_transaction() and not connection.get_execution_options().get(
            AUTOCOMMIT):
        # The driver would open one with the first statement, unseen by SQLAlchemy, which then
        # would not end it; begun here (no statement sent), it is committed or rolled back.
        connection.begin()
    if dialect.name == "sqlite":
        executed = (connection.execute(statement, dict(values)) for statement, values in steps)
        return [[tuple(row) for row in result] if result.returns_rows
                else [(result.rowcount, result.lastrowid)] for result in executed]
    dbapi_connection = connection.connection.dbapi_connection
    assert dbapi_connection is not None  # a checked-out connection has one
    sql = ""
    try:
        cursor = dbapi_connection.cursor()
        try:
            found_steps = [(compiled(statement, dialect), values) for statement, values in steps]
            sql = ";\n".join(cursor.mogrify(found.sql, found.values(values))
                              for found, values in found_steps)
            # A span when tracing is on: SQLAlchemy's instrumentation does not see this path.
            with tracing.sql_batch(connection, [found.sql for found, _ in found_steps]):
                cursor.execute(sql)
            results = [_fetched(cursor)]
            for _ in range(len(steps) - 1):
                cursor.nextset()
                results.append(_fetched(cursor))
            return results
        finally:
            cursor.close()
    except dialect.loaded_dbapi.Error as exc:
        raise _failed(connection, exc, sql) from exc


def _failed(connection: sa.Connection, exc: Any, sql: str) -> Exception:
    """SQLAlchemy's exception for a DB-API one met on `connection` outside its own execution
    path: the connection is marked failed (its reset rolls back), and invalidated — its pool
    emptied — when the server is gone, as SQLAlchemy does for its own statements."""
    dialect = connection.dialect
    disconnected = dialect.is_disconnect(exc, connection.connection.dbapi_connection, None)
    note(connection, FAILED, True)
    if disconnected:
        connection.invalidate(exc)
        connection.engine.dispose(close=False)
    error: Exception = sa.exc.DBAPIError.instance(
        sql, None, exc, dialect.loaded_dbapi.Error, dialect=dialect,
        connection_invalidated=disconnected)
    return error
