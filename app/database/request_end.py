"""The ORM session's end of each app context, which a connection the server dropped cannot turn
into a 500.

Flask-SQLAlchemy removes the session when the app context ends, rolling back what it left open
— a read-only request's transaction, say. If the server dropped the connection after the
request's last statement (a restart, a Galera node lost behind its proxy), that rollback meets
a dead socket and raises out of Flask's teardown, after the answer was made: the server sends
a 500 in its place. The answer stands (nothing was committed, and the rollback it could not
send is what the server did when the connection dropped), so the session is ended here first:
SQLAlchemy has invalidated the connection by then (a disconnect), and removing the session once
more returns nothing to the pool that is dead.
"""

from __future__ import annotations

import logging

from flask import Flask
from sqlalchemy.exc import SQLAlchemyError

from app.database.conflicts import server_said
from app.extensions import db

log = logging.getLogger(__name__)


def end_session(exc: BaseException | None = None) -> None:
    """Remove the app context's session; a failure to roll back is logged, not raised."""
    try:
        db.session.remove()
    except SQLAlchemyError as error:
        log.warning("event=db.session_end_failed error=%s detail=%r", type(error).__name__,
                    server_said(error))
        try:
            db.session.remove()  # the connection is invalidated now: nothing left to send
        except SQLAlchemyError:
            db.session.registry.clear()


def init_app(app: Flask) -> None:
    """After `db.init_app(app)`: teardowns run last-registered first, so this one ends the
    session before Flask-SQLAlchemy's own, which then finds nothing to do."""
    app.teardown_appcontext(end_session)
