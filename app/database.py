"""The database besides the ORM session: prebuilt statements batched on SQLAlchemy connections,
the engines of the two hot paths, what a pool does with a connection it gets back, and the
retry of a unit of work that met a conflict.

The platform calls two endpoints for every agent session: the context read when one starts and
the completion webhook when one ends. Their statements are built once at import (next to their
models), compiled once per dialect, and several are sent in one round trip where MySQL allows
(`batch`) — on SQLAlchemy connections, whose transactions SQLAlchemy opens and ends
(`engine.begin()`), never by bookkeeping of ours:

- `reads`: an AUTOCOMMIT engine for the context read: no transaction to end at all;
- `writes`: the webhook's engine; each delivery is one `writes.begin()` block.

No pooled connection crosses a fork: every engine of the app is disposed, without closing what
the parent holds, in a forked child (`os.register_at_fork`, SQLAlchemy's documented recipe for
pools and `os.fork()`), so a work horse opens its own connections. A socket the parent opened
and the server has since dropped (a restart, a proxy's idle timeout) is never a horse's first
read. (redis-py's pools check their process id on every use and start afresh in a child.)

Every engine of the app (the ORM's too) gives a connection back with `pool_reset_on_return=None`
and `prove_idle` as its reset: the ROLLBACK a pool sends on return is a round trip per unit of
work, so it is skipped only where the connection *proves* no transaction is open — SQLAlchemy
ended the last one it began, nothing failed since (an error answer carries no status), and the
driver's last word from the server agrees. The test suite checks on the server after every test
that nothing was left open.
"""

from __future__ import annotations

import functools
import logging
import os
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

import sqlalchemy as sa
from flask import Flask, current_app
from sqlalchemy.engine import Dialect
from sqlalchemy.pool import PoolResetState
from sqlalchemy.sql import Executable

from app import tls_reuse, tracing
from app.extensions import db

log = logging.getLogger(__name__)

EXTENSION = "hot_engines"
# Entries of a connection's `info` (kept with its pool record): a statement failed on it since
# it was last reset, so its transaction state is unknown; the last transaction SQLAlchemy began
# on it was ended (committed or rolled back).
FAILED = "memory.failed"
ENDED = "memory.ended"
# MySQL/MariaDB error numbers of a conflict between transactions: the loser is rolled back (or
# should be) and the same work may succeed when run again. Galera reports a certification
# failure at COMMIT as 1213 too.
DEADLOCK = 1213
LOCK_WAIT_TIMEOUT = 1205
CONFLICTS = frozenset({DEADLOCK, LOCK_WAIT_TIMEOUT})
CONFLICT_RETRIES = 2
# The execution option that marks an AUTOCOMMIT engine's connections: nothing to begin or end.
AUTOCOMMIT = "memory_autocommit"

P = ParamSpec("P")
T = TypeVar("T")


@dataclass(frozen=True)
class Compiled:
    sql: str
    defaults: dict[str, Any]  # literal values the statement was built with (status, LIMIT…)
    order: tuple[str, ...] | None  # parameter order, for positional paramstyles (SQLite)

    def values(self, params: dict[str, Any]) -> dict[str, Any] | tuple:
        merged = {**self.defaults, **params}
        return tuple(merged[name] for name in self.order) if self.order is not None else merged


_compiled: dict[tuple[int, str], Compiled] = {}
# A module-level statement and its values: one statement of a batch.
Statement = tuple[Executable, dict[str, Any]]


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


def _fetched(cursor: Any) -> list[tuple]:
    """The rows of the statement the cursor ran; for one that has none (INSERT, UPDATE,
    DELETE), one row: (rows affected, the id it inserted)."""
    if cursor.description is None:
        return [(cursor.rowcount, cursor.lastrowid)]
    return list(cursor.fetchall())


def batch(connection: sa.Connection, *statements: Statement) -> list[list[tuple]]:
    """The statements, in the connection's transaction, in one round trip — MySQL's
    multi-statement query, each statement's values escaped by the driver — or one after the
    other through SQLAlchemy where there are no round trips to save (SQLite). `_fetched` of
    each; the first failing statement raises (as SQLAlchemy's exception) and the rest are not
    run."""
    dialect = connection.dialect
    if not connection.in_transaction() and not connection.get_execution_options().get(
            AUTOCOMMIT):
        # The driver would open one with the first statement, unseen by SQLAlchemy, which then
        # would not end it; begun here (no statement sent), it is committed or rolled back.
        connection.begin()
    if dialect.name == "sqlite":
        results = (connection.execute(statement, params) for statement, params in statements)
        return [list(result) if result.returns_rows else [(result.rowcount, result.lastrowid)]
                for result in results]
    dbapi_connection = connection.connection.dbapi_connection
    sql = ""
    try:
        cursor = dbapi_connection.cursor()
        try:
            found_statements = [(compiled(statement, dialect), params)
                                for statement, params in statements]
            sql = ";\n".join(cursor.mogrify(found.sql, found.values(params))
                              for found, params in found_statements)
            # A span when tracing is on: SQLAlchemy's instrumentation does not see this path.
            with tracing.sql_batch(connection, [found.sql for found, _ in found_statements]):
                cursor.execute(sql)
            results = [_fetched(cursor)]
            for _ in range(len(statements) - 1):
                cursor.nextset()
                results.append(_fetched(cursor))
            return results
        finally:
            cursor.close()
    except dialect.loaded_dbapi.Error as exc:
        raise _failed(connection, exc, sql) from exc


def _failed(connection: sa.Connection, exc: Exception, sql: str) -> Exception:
    """SQLAlchemy's exception for a DB-API one met on `connection` outside its own execution
    path: the connection is marked failed (its reset rolls back), and invalidated — its pool
    emptied — when the server is gone, as SQLAlchemy does for its own statements."""
    dialect = connection.dialect
    disconnected = dialect.is_disconnect(exc, connection.connection.dbapi_connection, None)
    _note(connection, FAILED, True)
    if disconnected:
        connection.invalidate(exc)
        connection.engine.dispose(close=False)
    return sa.exc.DBAPIError.instance(sql, None, exc, dialect.loaded_dbapi.Error,
                                      dialect=dialect, connection_invalidated=disconnected)


# ---- what a pool does with a connection it gets back -----------------------------------------

def _driver_says_idle(dbapi_connection: Any) -> bool:
    """What the driver knows from the server's last answer: no transaction open."""
    in_transaction = getattr(dbapi_connection, "in_transaction", None)  # sqlite3
    if isinstance(in_transaction, bool):
        return not in_transaction
    status = getattr(dbapi_connection, "server_status", None)  # PyMySQL: of the last OK packet
    if isinstance(status, int):
        from pymysql.constants.SERVER_STATUS import SERVER_STATUS_IN_TRANS

        return not status & SERVER_STATUS_IN_TRANS
    return False


def prove_idle(dbapi_connection: Any, record: Any, state: PoolResetState) -> None:
    """The pool's reset (event `reset`, with `pool_reset_on_return=None`): a ROLLBACK unless the
    connection proves that nothing is open — SQLAlchemy ended the last transaction it began on
    it (a commit or a rollback; `batch` never sends outside one), nothing failed on it since,
    and the driver's last word from the server agrees."""
    if state.terminate_only or dbapi_connection is None:
        return
    info = record.info if record is not None else {}
    failed = info.pop(FAILED, False)
    if state.transaction_was_reset and not failed:
        return  # SQLAlchemy has just rolled it back itself
    if not failed and info.get(ENDED, True) and _driver_says_idle(dbapi_connection):
        return
    dbapi_connection.rollback()
    info[ENDED] = True


def _note(connection: sa.Connection | None, key: str, value: bool) -> None:
    """`key` in the pool record's info of `connection`, unless it is gone (invalidated: the
    pool will not get it back)."""
    if connection is not None and not connection.closed and not connection.invalidated:
        connection.info[key] = value


def _mark_failed(context: sa.engine.ExceptionContext) -> None:
    """Event `handle_error`: a statement failed on this connection (see `prove_idle`)."""
    _note(context.connection, FAILED, True)


def _began(connection: sa.Connection) -> None:
    _note(connection, ENDED, False)


def _ended(connection: sa.Connection) -> None:
    _note(connection, ENDED, True)


# Every engine `guard` has seen, for `_dispose_after_fork`; weak, so an app that is gone (tests
# build many) takes its engines with it.
_engines: weakref.WeakSet[sa.Engine] = weakref.WeakSet()


def _dispose_after_fork() -> None:
    """In a forked child: every engine gets a new, empty pool; the parent's connections are
    left untouched for the parent (`dispose(close=False)`)."""
    for engine in list(_engines):
        engine.dispose(close=False)


os.register_at_fork(after_in_child=_dispose_after_fork)


def guard(engine: sa.Engine) -> sa.Engine:
    """`engine` resets what it gets back by `prove_idle`, tracks what that needs, and starts
    with an empty pool in a forked child."""
    _engines.add(engine)
    # A work horse opens its connections anew each job: none rebuilds a TLS context.
    tls_reuse.share_tls_context(engine)
    sa.event.listen(engine, "reset", prove_idle)
    sa.event.listen(engine, "handle_error", _mark_failed)
    sa.event.listen(engine, "begin", _began)
    sa.event.listen(engine, "commit", _ended)
    sa.event.listen(engine, "rollback", _ended)
    return engine


# ---- conflicts between transactions ------------------------------------------------------------

def is_conflict(exc: BaseException) -> bool:
    """A deadlock or lock-wait timeout (a Galera certification failure is a deadlock): the
    transaction lost to another one, and the same work may succeed when run again."""
    orig = getattr(exc, "orig", None)
    args = getattr(orig, "args", None)
    return (isinstance(exc, sa.exc.OperationalError) and bool(args)
            and args[0] in CONFLICTS)


def retry_conflicts(work: Callable[P, T]) -> Callable[P, T]:
    """`work` — a whole unit of work: it opens, commits or rolls back its own transaction —
    run again when it lost a conflict (at most CONFLICT_RETRIES times), or once when its pooled
    connection turned out dead (the server restarted; `_failed` emptied the pool). Then the
    error is raised: a 503 to a web client, a dependency failure, not the request's."""

    @functools.wraps(work)
    def retried(*args: P.args, **kwargs: P.kwargs) -> T:
        conflicts = reconnected = 0
        while True:
            try:
                return work(*args, **kwargs)
            except sa.exc.DBAPIError as exc:
                if is_conflict(exc) and conflicts < CONFLICT_RETRIES:
                    conflicts += 1
                    log.info("event=db.conflict_retry work=%s attempt=%d error=%s",
                             work.__qualname__, conflicts, exc.orig.args[0])
                    time.sleep(0.005 * conflicts)
                elif exc.connection_invalidated and not reconnected:
                    reconnected += 1
                    # A session whose connection died mid-transaction refuses every statement
                    # until rolled back (PendingRollbackError): the work left nothing to keep.
                    db.session.rollback()
                else:
                    raise

    return retried


# ---- the hot paths' engines --------------------------------------------------------------------

@dataclass(frozen=True)
class HotEngines:
    reads: sa.Engine  # AUTOCOMMIT: the context read
    writes: sa.Engine  # the webhook's transactions

    def dispose(self) -> None:
        self.reads.dispose()
        if self.writes is not self.reads:
            self.writes.dispose()

    def pools(self) -> list[sa.pool.Pool]:
        return [self.reads.pool] + ([] if self.writes is self.reads else [self.writes.pool])


def init_app(app: Flask, orm_engine_options: dict[str, Any]) -> None:
    url = app.config["SQLALCHEMY_DATABASE_URI"]
    # No ping on checkout (a round trip): a connection the server dropped fails its first
    # statement, which invalidates the pool (`_failed`), and the unit of work is run again
    # (`retry_conflicts` does not; the webhook's caller does, see `intake.receive`).
    options = {k: v for k, v in orm_engine_options.items()
               if k not in ("isolation_level", "pool_pre_ping", "pool_reset_on_return")}
    reads = guard(sa.create_engine(url, isolation_level="AUTOCOMMIT",
                                   pool_reset_on_return=None, **options)
                  ).execution_options(**{AUTOCOMMIT: True})
    if url.startswith("sqlite"):
        # One local file and no round trips: the webhook needs no pool of its own, and SQLite's
        # locking stays the ORM engine's.
        with app.app_context():
            writes = db.engine
    else:
        writes = guard(sa.create_engine(
            url, pool_reset_on_return=None,
            isolation_level=orm_engine_options.get("isolation_level"), **options))
    app.extensions[EXTENSION] = HotEngines(reads, writes)


def hot_engines() -> HotEngines:
    return current_app.extensions[EXTENSION]


def batch_in_session(*statements: Statement) -> list[list[tuple]]:
    """`batch` in the ORM session's transaction (the unit of work's)."""
    return batch(db.session.connection(), *statements)
