"""memory_item as built by the migrations: unique key, indexes, index-ordered reads."""

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from app.database import batches
from app.db_types import utcnow
from app.extensions import db
from app.memory import journal, repository, rules
from app.memory.models import MemoryEvent, MemoryItem
from app.memory.repository import Filters
from app.memory.rules import Scope, Status
from app.paging import PageRequest


def _row(user_id: int, content: str, **fields) -> MemoryItem:
    now = utcnow()
    scope = fields.pop("scope", "USER")
    key = fields.pop("project_key", "")
    fields = {"source": "MANUAL", "status": "ACTIVE", **fields}
    return MemoryItem(user_id=user_id, scope=scope, project_key=key, content=content,
                      dedup_hash=rules.dedup_hash(scope, key, content), created_at=now,
                      updated_at=now, **fields)


def test_dedup_unique_key_rejects_same_user_same_hash(ctx):
    db.session.add(_row(1, "we use pnpm"))
    db.session.commit()
    db.session.add(_row(1, "  we   use\npnpm "))
    with pytest.raises(IntegrityError):
        db.session.commit()
    db.session.rollback()


def test_dedup_unique_key_is_per_user(ctx):
    db.session.add_all([_row(1, "we use pnpm"), _row(2, "we use pnpm")])
    db.session.commit()
    assert db.session.scalar(sa.select(sa.func.count()).select_from(MemoryItem)) == 2


def test_timestamps_keep_microseconds(ctx):
    item = _row(1, "fact")
    db.session.add(item)
    db.session.commit()
    stored = db.session.execute(sa.text("SELECT updated_at FROM memory_item")).scalar_one()
    assert stored == item.updated_at and stored.microsecond == item.updated_at.microsecond


@contextmanager
def captured_selects(monkeypatch, table: str = "memory_item") -> Iterator[list[tuple[str, dict]]]:
    """The SELECTs on `table` the code under test really sends, through the session and in
    batches."""
    captured: list[tuple[str, dict]] = []

    def grab(conn, cursor, statement, parameters, context, executemany):
        if statement.lstrip().startswith("SELECT") and table in statement:
            captured.append((statement, parameters))

    run = batches.run

    def recording_run(connection, steps):
        for statement, values in steps:
            found = batches.compiled(statement, connection.dialect)
            captured.append((found.sql, {**found.defaults, **values}))
        return run(connection, steps)

    # Every batch sends through `run`.
    monkeypatch.setattr(batches, "run", recording_run)
    sa.event.listen(db.engine, "before_cursor_execute", grab)
    try:
        yield captured
    finally:
        sa.event.remove(db.engine, "before_cursor_execute", grab)


def _plan(statement: str, parameters: dict) -> list[tuple]:
    raw = db.engine.raw_connection()
    try:
        cursor = raw.cursor()
        cursor.execute("EXPLAIN " + statement, parameters)
        columns = [c[0] for c in cursor.description]
        return [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]
    finally:
        raw.close()


@pytest.fixture
def populated(ctx):
    """Several users with mixed rows, so the optimizer has real choices to make."""
    db.session.add_all([_row(u, f"fact {u} {i}", scope="PROJECT" if i % 2 else "USER",
                             project_key="mao" if i % 2 else "",
                             status="DISMISSED" if i % 5 == 0 else "ACTIVE")
                        for u in range(1, 61) for i in range(80)])
    db.session.commit()
    db.session.execute(sa.text("ANALYZE TABLE memory_item"))


@pytest.mark.parametrize("read", [
    pytest.param(lambda: repository.injection_rows(7, "mao"), id="injection-with-project"),
    pytest.param(lambda: repository.injection_rows(7, None), id="injection-user-only"),
    pytest.param(lambda: repository.page(7, Filters(), PageRequest()), id="list-all"),
    pytest.param(lambda: repository.page(7, Filters(status=Status.ACTIVE), PageRequest()),
                 id="list-active"),
    pytest.param(lambda: repository.page(7, Filters(scope=Scope.USER, status=Status.ACTIVE),
                                         PageRequest()), id="list-scope"),
    pytest.param(lambda: repository.page(7, Filters(project_key="mao", status=Status.DISMISSED),
                                         PageRequest()), id="list-project"),
    pytest.param(lambda: repository.page(7, Filters(q="fact 1"), PageRequest()), id="search"),
    pytest.param(lambda: repository.page(7, Filters(q="fact", status=Status.ACTIVE),
                                         PageRequest()), id="search-active"),
])
def test_list_and_injection_reads_are_index_ordered(populated, monkeypatch, read):
    with captured_selects(monkeypatch) as statements:
        read()
    assert statements
    for statement, parameters in statements:
        for step in _plan(statement, parameters):
            assert step["key"] and step["key"] != "PRIMARY", (statement, step)
            assert "filesort" not in (step["Extra"] or ""), (statement, step)


def test_a_memorys_history_is_one_indexed_query(populated, monkeypatch):
    """Its events by idx_memory_event_memory, in the index's order."""
    db.session.execute(sa.insert(MemoryEvent), [
        {"memory_id": m, "user_id": 7, "type": "CREATED", "actor": "USER", "at": utcnow()}
        for m in range(1, 400)])
    db.session.commit()
    with captured_selects(monkeypatch, table="memory_event") as statements:
        assert len(journal.history(7, 42)) == 1
    ((statement, parameters),) = statements
    (step,) = _plan(statement, parameters)
    assert step["key"] == "idx_memory_event_memory", step
    assert "filesort" not in (step["Extra"] or ""), step
