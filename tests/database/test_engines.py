"""The hot paths' engines (`app.database.engines`) on the real database."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pymysql.connections
import pytest
from flask import Flask

from app.database.engines import hot_engines


@contextmanager
def sent(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The SQL text of every query the driver sends meanwhile."""
    texts: list[str] = []
    send = pymysql.connections.Connection._execute_command

    def recorded(connection: Any, command: int, sql: Any) -> Any:
        texts.append(sql if isinstance(sql, str) else sql.decode("utf-8", "replace"))
        return send(connection, command, sql)

    with monkeypatch.context() as patched:
        patched.setattr(pymysql.connections.Connection, "_execute_command", recorded)
        yield texts


def test_a_new_read_connection_is_autocommit_without_switching_it_twice(app: Flask, monkeypatch):
    """The driver would turn autocommit off as it connects and SQLAlchemy on again: two round
    trips for every new connection, and a forked work horse opens one per job."""
    with app.app_context():
        reads = hot_engines().reads
        reads.dispose()
        with sent(monkeypatch) as texts, reads.connect() as conn:
            (autocommit,) = conn.exec_driver_sql("SELECT @@autocommit").one()
    assert autocommit == 1
    assert not [text for text in texts if text.upper().startswith("SET AUTOCOMMIT")], texts
