"""Sharding-ready by user (issues 26, 39): every statement a full pipeline run sends to a
per-user table names exactly one user as the value of the table's routing column — a predicate
(`user_id = 7`, `user_id IN (7)`) or, in an INSERT, the column's value in every row — and no
transaction touches two users. So the tables can be split by user id (a Vitess keyspace sharded
on user_id, docs/scaling.md) and every statement and transaction goes to one shard: a statement
that only mentions the id somewhere (in a string, in another column) is not routed by it.

The SQL is captured where every path meets: pymysql's cursor, which both the ORM and the raw
batches of `app.database.batches` (which bypass SQLAlchemy's cursor events) send through. Commit and
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
# The column whose value says which shard a per-user table's row lives on: `user_id`, except
# `user` (its own id) and `memory_access_log`, whose row belongs to the user whose memories were
# read (`subject_user_id`; the reader, an administrator, is only a value in it). An
# administrator's page of every audit read is a read across users, as the admin's pages are.
ROUTING = {"user": "id", "memory_access_log": "subject_user_id"}


@dataclass
class Capture:
    """Statements by transaction, in the order they ended."""

    transactions: list[list[str]] = field(default_factory=list)
    open: dict[int, list[str]] = field(default_factory=dict)
    # What an administrator's audit reads: it may look across users (by a memory's id alone).
    auditing: bool = False
    audit_reads: set[str] = field(default_factory=set)

    def statement(self, connection: Any, sql: str) -> None:
        if self.auditing and sql.lstrip().upper().startswith("SELECT"):
            self.audit_reads.add(sql)
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
        # A raw batch is several statements joined by ";\n" (`app.database.batches.run`).
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
                if ROUTING.get(table.name, "user_id") in table.c}


def _tables_in(statement: str, tables: set[str]) -> set[str]:
    named = re.findall(r"\b(?:FROM|JOIN|INTO|UPDATE|TABLE)\s+`?(\w+)`?", statement, re.I)
    return {name for name in named if name in tables}


def _names_joined(statement: str, table: str) -> bool:
    """`user` joined only to show a name: `JOIN user AS u ON u.id = other.column`. On a sharded
    database that join is routed row by row by the joined id (vtgate's nested-loop join: one
    shard per name), like the page that shows who read a user's memories."""
    joins = re.findall(rf"JOIN\s+`?{table}`?\s+(?:AS\s+)?`?(\w+)`?\s+ON\s+`?(\w+)`?\.`?id`?\s*="
                       r"\s*`?\w+`?\.`?\w+`?", statement, re.I)
    mentions = len(re.findall(rf"(?:FROM|JOIN|INTO|UPDATE)\s+`?{table}`?\b", statement, re.I))
    return table == "user" and bool(joins) and all(alias == on for alias, on in joins) \
        and len(joins) == mentions


def _directory_lookup(statement: str, tables: set[str]) -> bool:
    return tables <= DIRECTORY | {"user"} and (
        bool(tables & DIRECTORY) or re.search(r"\buser\.username = ", statement) is not None)


def _users_in(statement: str) -> set[int]:
    return {user for user in USERS if str(user) in statement}


def _sql_list(statement: str, start: int) -> tuple[list[str], int]:
    """The top-level comma-separated items of the parenthesised SQL list whose `(` is just
    before `start`, and where its `)` is: literals stay whole (pymysql's backslash escapes
    included), nested parentheses too."""
    items, current, depth, quote, i = [], [], 0, "", start
    while i < len(statement):
        char = statement[i]
        current.append(char)
        if quote and char == "\\":
            current.append(statement[i + 1])
            i += 1
        elif quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "(":
            depth += 1
        elif char == ")" and depth:
            depth -= 1
        elif char in ",)":
            items.append("".join(current[:-1]).strip())
            current = []
            if char == ")":
                return items, i
        i += 1
    raise AssertionError(f"an unclosed list in {statement[start:start + 200]}")


def _inserted_rows(statement: str, start: int) -> Iterator[list[str]]:
    """Each row of an INSERT's VALUES list that begins at `start`."""
    opening = re.compile(r"\s*,?\s*\(")
    while (found := opening.match(statement, start)) is not None:
        row, end = _sql_list(statement, found.end())
        yield row
        start = end + 1


LITERAL = re.compile(r"'(?:[^'\\]|\\.)*'")
INSERT = re.compile(r"^\s*INSERT\s+(?:IGNORE\s+)?INTO\s+`?(\w+)`?\s*\(([^)]*)\)\s*VALUES\s*",
                    re.I)


def _routed_to(statement: str, table: str) -> list[int]:
    """The user ids `statement` names as `table`'s routing column's value: in each row it
    inserts, or in its predicates (qualified by the table when others are named)."""
    column = ROUTING.get(table, "user_id")
    insert = INSERT.match(statement)
    if insert is not None and insert.group(1) == table:
        at = [c.strip(" `") for c in insert.group(2).split(",")].index(column)
        values = [row[at] for row in _inserted_rows(statement, insert.end())]
        # A row whose routing value is no literal (a subquery, NULL) is routed by nothing.
        return [int(v) if v.isdigit() else -1 for v in values]
    qualifier = rf"`?{table}`?\." if column == "id" else rf"(?:`?{table}`?\.)?"
    statement = LITERAL.sub("''", statement)  # what a string says is no predicate
    found = re.findall(rf"(?<![\w.]){qualifier}`?{column}`?\s*(?:=\s*(\d+)|IN\s*\(([\d,\s]+)\))",
                       statement, re.I)
    return [int(v) for equal, listed in found for v in ([equal] if equal else
                                                          listed.replace(" ", "").split(","))]


def _run_pipeline(app: Flask, client: Any, llm: Any, users: Any, run_jobs: Any,
                  admin: Api, captured: Capture) -> None:
    """What a user's memories go through: a completion delivered and extracted, the context
    read, the user's own edits, a consolidation of their group, an administrator's audit of
    them (an access log row) and the user's look at who read them."""
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
        captured.auditing = True
        assert_ok(admin.get(f"/api/v1/admin/memory?userId={user_id}"))
        assert_ok(admin.get(f"/api/v1/admin/memory/{remaining[0]}/history"))
        captured.auditing = False
        assert own.delete(f"/api/v1/memory/{remaining[0]}")[0] in (200, 204)
        assert assert_ok(own.get("/api/v1/memory/access-log"))["records"]


def test_every_statement_on_a_per_user_table_is_routed_by_one_user_id_and_no_transaction_spans_two(
        app, client, llm, users, run_jobs, admin, captured):
    _run_pipeline(app, client, llm, users, run_jobs, admin, captured)
    tables = _per_user_tables(app)
    on_user_tables = [(statement, _tables_in(statement, tables))
                      for transaction in captured.transactions for statement in transaction]
    on_user_tables = [(s, t) for s, t in on_user_tables if t]
    assert len(on_user_tables) > 50, "the run sent too little SQL to say anything"
    touched = set().union(*(t for _, t in on_user_tables))
    assert {"memory_item", "memory_event", "memory_access_log", "user"} <= touched
    # An administrator's audit may read across users (a memory's history by its id alone: a
    # scatter query on a sharded database, docs/scaling.md); what it writes (the access log row)
    # is routed like everything else.
    routed = [(s, t) for s, t in on_user_tables
              if s not in captured.audit_reads and not _directory_lookup(s, t)]
    unrouted = sorted({f"{table}: {' '.join(statement.split())[:300]}"
                       for statement, named in routed for table in named
                       if not _names_joined(statement, table)
                       and (len(set(_routed_to(statement, table))) != 1
                            or -1 in _routed_to(statement, table))})
    assert unrouted == [], "statements not routed by exactly one user id:\n" + "\n".join(unrouted)
    assert {s.split(None, 1)[0].upper() for s, _ in routed} >= {"SELECT", "INSERT", "UPDATE"}
    spanning = [t for t in captured.transactions if len(set().union(*map(_users_in, t))) > 1]
    assert spanning == [], spanning[:3]


@pytest.mark.parametrize(("statement", "table", "routed_to"), [
    ("SELECT * FROM memory_item WHERE memory_item.user_id = 7 AND memory_item.id = 3",
     "memory_item", [7]),
    ("DELETE FROM memory_item WHERE user_id IN (7, 8)", "memory_item", [7, 8]),
    # The id in a string or in another column routes nothing.
    ("SELECT * FROM memory_item WHERE content = 'user_id = 7' AND id = 7", "memory_item", []),
    ("UPDATE user SET memory_lock_seq = memory_lock_seq + 1 WHERE user.id = 7", "user", [7]),
    ("INSERT INTO memory_event (user_id, memory_id, after) VALUES (7, 1, 'a, (b'), "
     "(8, 2, 'it\\'s')", "memory_event", [7, 8]),
    ("INSERT INTO memory_access_log (viewer_id, subject_user_id, what) VALUES (1, 7, 'LIST')",
     "memory_access_log", [7]),
    ("INSERT INTO memory_item (user_id, content) VALUES ((SELECT 7), 'x')", "memory_item", [-1]),
])
def test_a_statement_is_routed_by_the_values_of_its_tables_routing_column(statement, table,
                                                                          routed_to):
    assert _routed_to(statement, table) == routed_to
