"""What a pool does with a connection: the reset it gets back with, and a new pool in a forked
child.

Every engine of the app (the ORM's too) gives a connection back with `pool_reset_on_return=None`
and `prove_idle` as its reset: the ROLLBACK a pool sends on return is a round trip per unit of
work, so it is skipped only where the connection *proves* no transaction is open — SQLAlchemy
ended the last one it began, nothing failed since (an error answer carries no status), and the
driver's last word from the server agrees. The test suite checks on the server after every test
that nothing was left open.

No pooled connection crosses a fork: every engine is disposed, without closing what the parent
holds, in a forked child (`os.register_at_fork`, SQLAlchemy's documented recipe for pools and
`os.fork()`), so a work horse opens its own connections. A socket the parent opened and the
server has since dropped (a restart, a proxy's idle timeout) is never a horse's first read.
(redis-py's pools check their process id on every use and start afresh in a child.)
"""

from __future__ import annotations

import os
import weakref
from typing import Any

import sqlalchemy as sa
from sqlalchemy.pool import PoolResetState

from app import tls_reuse

# Entries of a connection's `info` (kept with its pool record): a statement failed on it since
# it was last reset, so its transaction state is unknown; the last transaction SQLAlchemy began
# on it was ended (committed or rolled back).
FAILED = "memory.failed"
ENDED = "memory.ended"


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
    it (a commit or a rollback; a batch never sends outside one), nothing failed on it since,
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


def note(connection: sa.Connection | None, key: str, value: bool) -> None:
    """`key` in the pool record's info of `connection`, unless it is gone (invalidated: the
    pool will not get it back)."""
    if connection is not None and not connection.closed and not connection.invalidated:
        connection.info[key] = value


def _mark_failed(context: sa.engine.ExceptionContext) -> None:
    """Event `handle_error`: a statement failed on this connection (see `prove_idle`)."""
    note(context.connection, FAILED, True)


def _began(connection: sa.Connection) -> None:
    note(connection, ENDED, False)


def _ended(connection: sa.Connection) -> None:
    note(connection, ENDED, True)


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
