"""A database connection dropped under a request (a restart, a node lost behind the proxy) is
read again on a fresh one, never a 500 (SPEC §11)."""

from __future__ import annotations

import sqlalchemy as sa
from flask import request_finished

from app.extensions import db
from tests.conftest import TEST_DATABASE_URL, assert_ok


def test_the_personal_token_lookup_reads_again_when_its_connection_drops(app, alice):
    """The connection passed the pool's ping, then the server drops it just as the token lookup
    is sent: the lookup must be read again on a fresh connection."""
    killer = sa.create_engine(TEST_DATABASE_URL)
    dropped = []

    def drop_it_first(conn, cursor, statement, parameters, context, executemany):
        if "api_token" in statement and not dropped:
            victim = conn.connection.dbapi_connection.thread_id()
            with killer.connect() as other:
                other.execute(sa.text(f"KILL CONNECTION {int(victim)}"))
            dropped.append(victim)

    with app.app_context():
        engine = db.engine
    sa.event.listen(engine, "before_cursor_execute", drop_it_first)
    try:
        assert_ok(alice.get("/api/v1/memory"))
    finally:
        sa.event.remove(engine, "before_cursor_execute", drop_it_first)
        killer.dispose()
    assert dropped, "the token lookup never ran"


def test_a_connection_dropped_after_the_answer_is_made_is_not_a_500(app, alice):
    """The server drops the request's connection after its last statement (a node lost behind
    the proxy): the end-of-request rollback meets a dead connection. The answer was made from
    what was read; it is sent, not replaced by a 500."""
    killer = sa.create_engine(TEST_DATABASE_URL)
    dropped = []

    def drop_it(sender, response, **extra):
        victim = db.session.connection().connection.dbapi_connection.thread_id()
        with killer.connect() as other:
            other.execute(sa.text(f"KILL CONNECTION {int(victim)}"))
        dropped.append(victim)

    request_finished.connect(drop_it, app)
    try:
        assert_ok(alice.get("/api/v1/memory"))
    finally:
        request_finished.disconnect(drop_it, app)
        killer.dispose()
    assert dropped
    assert_ok(alice.get("/api/v1/memory"))  # and the dead connection is not handed out again
