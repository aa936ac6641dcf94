"""Conflicts between transactions: a unit of work that lost one is run again.

MySQL/MariaDB roll the loser of a deadlock back (Galera reports a certification failure at
COMMIT as a deadlock too), and the same work may succeed when run again; so may a unit of work
whose pooled connection turned out dead (the server restarted: `batches` and SQLAlchemy
empty the pool when they meet that).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import sqlalchemy as sa

from app.extensions import db

log = logging.getLogger(__name__)

# MySQL/MariaDB error numbers of a conflict between transactions.
DEADLOCK = 1213
LOCK_WAIT_TIMEOUT = 1205
CONFLICTS = frozenset({DEADLOCK, LOCK_WAIT_TIMEOUT})
CONFLICT_RETRIES = 2
# MySQL client errors of a server that could not be reached: no connection was made (2002 over
# a socket, 2003 over TCP — refused, or cut during the handshake, as HAProxy does in the
# seconds before it marks a killed Galera node down). SQLAlchemy counts only the loss of an
# open connection as a disconnect, so these come without `connection_invalidated`.
UNREACHABLE = frozenset({2002, 2003})

P = ParamSpec("P")
T = TypeVar("T")


def is_conflict(exc: BaseException) -> bool:
    """A deadlock or lock-wait timeout (a Galera certification failure is a deadlock): the
    transaction lost to another one, and the same work may succeed when run again."""
    return isinstance(exc, sa.exc.OperationalError) and _error_number(exc) in CONFLICTS


def is_unavailable(exc: BaseException) -> bool:
    """The database went away under the work (its connection invalidated) or could not be
    reached at all: nothing of the work committed, and it may succeed once the server answers."""
    if isinstance(exc, sa.exc.DBAPIError) and exc.connection_invalidated:
        return True
    return isinstance(exc, sa.exc.OperationalError) and _error_number(exc) in UNREACHABLE


def server_said(exc: BaseException) -> object:
    """What the server or the driver said of a failed statement, for a log line: the driver
    exception's arguments (MySQL's error number and message), never SQLAlchemy's text of it,
    which carries the SQL."""
    orig = getattr(exc, "orig", None)
    return orig.args if orig is not None else str(exc)


def _error_number(exc: sa.exc.DBAPIError) -> object:
    """The server's error number of the driver's exception (MySQL's first argument)."""
    args = getattr(exc.orig, "args", ())
    return args[0] if args else None


def retry_conflicts(work: Callable[P, T]) -> Callable[P, T]:
    """`work` — a whole unit of work: it opens, commits or rolls back its own transaction —
    run again when it lost a conflict (at most CONFLICT_RETRIES times), or once when its pooled
    connection turned out dead (the server restarted and the pool was emptied). Then the error
    is raised: a 503 to a web client, a dependency failure, not the request's."""

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
                             getattr(work, "__qualname__", work), conflicts,
                             _error_number(exc))
                    time.sleep(0.005 * conflicts)
                elif exc.connection_invalidated and not reconnected:
                    reconnected += 1
                    # A session whose connection died mid-transaction refuses every statement
                    # until rolled back (PendingRollbackError): the work left nothing to keep.
                    db.session.rollback()
                else:
                    raise

    return retried
