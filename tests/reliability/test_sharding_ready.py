"""Sharding-ready by user (issue 26): every statement a full pipeline run sends to a per-user
table names the user, and no transaction touches two users — so the tables can be split by
user id (a Vitess keyspace sharded on user_id, docs/scaling.md) and every statement and
transaction goes to one shard.

The SQL is captured where every path meets: pymysql's cursor, which both the ORM and the raw
batches of `app.database` (which bypass SQLAlchemy's cursor events) send through. Commit and
rollback end a transaction; a statement on an autocommit connection is one on its own."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pymysql.connections
import pymysql.cursors
import pytest
from flask import Flask

from app.db_types import utcnow
from app.extensions import db
from tests.completions import (
    capture_on,
    enqueue_consolidation,
    event,
    last_consolidation,
    post_webhook,
)
from tests.conftest import SERVICE_TOKEN, WEBHOOK_SECRET, Api, assert_ok

# Ids no other number of the run contains, so the SQL text says which user it is about.
USERS = (7100000001, 7100000002)
# Credentials are looked up before anyone knows whose they are: a personal token by its hash, a
# login by its session id, an account by its username. These small tables stay unsharded (a
# directory keyspace; for `user`, a Vitess lookup vindex username → id), docs/scaling.md.
DIRECTORY = {"api_token", "login_session"}


@dataclass
class Capture:
    """Statements by transaction, in the order they ended."""

    transactions: list[list[str]] = field(default_factory=list)
    open: dict[int, list[str]] = field(default_factory=dict)

    def statement(self, connection: Any, sql: str) -> None:
        if connection.get_autocommit():
            self.transactions.append([sql])
        else:
            self.open.setdefault(id(connection), []).append(sql)

    def end(self, connection: Any) -> None:
        statements = self.open.pop(id(connection), [])
        if statements:
            self.transactions.append(statements)


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> Iterator[Capture]:
    capture = Capture()
    query, commit, rollback = (pymysql.cursors.Cursor._query,
                               pymysql.connections.Connection.commit,
                               pymysql.connections.Connection.rollback)

    def _query(cursor: Any, sql: str) -> Any:
        text = sql.decode("utf-8", "replace") if isinstance(sql, bytes) else sql
        # A raw batch is several statements joined by ";\n" (`database.batch`).
        for statement in text.split(";\n"):
            capture.statement(cursor.connection, statement)
        return query(cursor, sql)

    def ending(original: Any) -> Any:
        def end(connection: Any) -> Any:
            capture.end(connection)
            return original(connection)
        return end

    monkeypatch.setattr(pymysql.cursors.Cursor, "_query", _query)
    monkeypatch.setattr(pymysql.connections.Connection, "commit", ending(commit))
    monkeypatch.setattr(pymysql.connections.Connection, "rollback", ending(rollback))
    yield capture


def _per_user_tables(app: Flask) -> set[str]:
    with app.app_context():
        return {table.name for table in db.metadata.sorted_tables
                if "user_id" in table.c or table.name == "user"}


def _tables_in(statement: str, tables: set[str]) -> set[str]:
    named = re.findall(r"\b(?:FROM|JOIN|INTO|UPDATE|TABLE)\s+`?(\w+)`?", statement, re.I)
    return {name for name in named if name in tables}


def _directory_lookup(statement: str, tables: set[str]) -> bool:
    return tables <= DIRECTORY | {"user"} and (
        bool(tables & DIRECTORY) or re.search(r"\buser\.username = ", statement) is not None)


def _users_in(statement: str) -> set[int]:
    return {user for user in USERS if str(user) in statement}


def _run_pipeline(app: Flask, client: Any, llm: Any, users: Any, run_jobs: Any) -> None:
    """What a user's memories go through: a completion delivered and extracted, the context
    read, the user's own edits, a consolidation of their group."""
    platform = Api(client, {"Authorization": f"Bearer {SERVICE_TOKEN}"})
    for n, user_id in enumerate(USERS):
        name = f"shard{n}"
        users.user(name, user_id=user_id)
        capture_on(app, user_id)
        last_consolidation(app, utcnow(), user_id)
        llm.reply_items([{"type": "user", "content": f"用户{n}:报告都用中文来写"}])
        status, _ = post_webhook(client, event(userId=user_id, sessionId=800 + n),
                                 secret=WEBHOOK_SECRET)
        assert status == 202
        run_jobs()
        assert_ok(platform.get(f"/api/v1/internal/memory/context?userId={user_id}"
                               "&projectKey=mao"))
        own = Api(client, {"Authorization": f"Bearer {users.token(name)}"}, user_id)
        item = assert_ok(own.post("/api/v1/memory", {"scope": "USER",
                                                     "content": f"手工记忆 {n}"}), 201)["id"]
        assert_ok(own.patch(f"/api/v1/memory/{item}", {"content": f"改过的手工记忆 {n}"}))
        learned = [m["id"] for m in assert_ok(own.get("/api/v1/memory"))["records"]]
        llm.reply_items([{"op": "merge", "sourceIds": learned, "content": f"合并后的记忆 {n}"}])
        enqueue_consolidation(app, None, user_id)
        run_jobs()
        remaining = [m["id"] for m in assert_ok(own.get("/api/v1/memory"))["records"]]
        assert own.delete(f"/api/v1/memory/{remaining[0]}")[0] in (200, 204)


def test_every_statement_on_a_per_user_table_names_its_user_and_no_transaction_spans_two(
        app, client, llm, users, run_jobs, captured):
    _run_pipeline(app, client, llm, users, run_jobs)
    tables = _per_user_tables(app)
    on_user_tables = [(statement, _tables_in(statement, tables))
                      for transaction in captured.transactions for statement in transaction]
    on_user_tables = [(s, t) for s, t in on_user_tables if t]
    assert len(on_user_tables) > 50, "the run sent too little SQL to say anything"
    touched = set().union(*(t for _, t in on_user_tables))
    assert {"memory_item", "user"} <= touched
    unnamed = [s for s, t in on_user_tables if not _users_in(s) and not _directory_lookup(s, t)]
    assert unnamed == [], "statements on per-user tables without the user id:\n" + \
        "\n".join(sorted({" ".join(s.split())[-150:] for s in unnamed}))
    spanning = [t for t in captured.transactions if len(set().union(*map(_users_in, t))) > 1]
    assert spanning == [], spanning[:3]
