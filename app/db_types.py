"""Column types shared by every model, so MySQL and SQLite get the same shapes."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import mysql, sqlite
from sqlalchemy.sql import Executable

# BIGINT ids on MySQL; SQLite only auto-increments an INTEGER PRIMARY KEY.
BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

# Sub-second timestamps so "newest first" has no ties within one second (SPEC §3).
Timestamp = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")


def project_key_type(max_length: int = 128) -> sa.types.TypeEngine:
    """Project keys compare byte-for-byte on MySQL too ('Mao' and 'mao' are two projects)."""
    return sa.String(max_length).with_variant(
        mysql.VARCHAR(max_length, charset="utf8mb4", collation="utf8mb4_bin"), "mysql", "mariadb"
    )


ProjectKey = project_key_type()


def utcnow() -> datetime:
    """Naive UTC with microseconds: what every timestamp column stores."""
    return datetime.now(UTC).replace(tzinfo=None)


def iso(value: datetime | None) -> str | None:
    """ISO-8601 UTC with a Z suffix, as the API shows timestamps."""
    return None if value is None else value.isoformat(timespec="microseconds") + "Z"


DIALECT_FAMILIES = ("sqlite", "mysql")


def dialect_family(dialect_name: str) -> str:
    """'sqlite', or 'mysql' for MySQL and MariaDB: what an upsert is written for."""
    return "sqlite" if dialect_name == "sqlite" else "mysql"


def table_of(model: type[Any]) -> sa.Table:
    """The table a model maps. SQLAlchemy types `__table__` as any FROM clause (a class may map
    a join or a SELECT); every model here maps one table."""
    table = model.__table__
    assert isinstance(table, sa.Table)
    return table


def upsert(table: sa.Table, dialect_name: str, values: dict[str, Any],
           update: Iterable[str] = ()) -> Executable:
    """INSERT that, when the primary key exists, updates the `update` columns instead (or does
    nothing): one statement, so two first writers of a key cannot collide."""
    update = tuple(update)
    key = list(table.primary_key.columns)
    if dialect_family(dialect_name) == "sqlite":
        statement = sqlite.insert(table).values(values)
        if not update:
            return statement.on_conflict_do_nothing(index_elements=key)
        return statement.on_conflict_do_update(
            index_elements=key, set_={name: statement.excluded[name] for name in update})
    statement = mysql.insert(table).values(values)
    if not update:
        return statement.on_duplicate_key_update({key[0].name: statement.inserted[key[0].name]})
    return statement.on_duplicate_key_update(
        {name: statement.inserted[name] for name in update})


def prebuilt_upserts(table: sa.Table, columns: Iterable[str],
                     update: Iterable[str] = ()) -> dict[str, Executable]:
    """An upsert per dialect family with a bind parameter per column, built once at import
    for the hot paths' batches (`app.database.batches`)."""
    values = {name: sa.bindparam(name) for name in columns}
    return {family: upsert(table, family, values, update) for family in DIALECT_FAMILIES}


@sa.event.listens_for(sa.Engine, "connect")
def _unicode_lower_on_sqlite(dbapi_connection: Any, _record: Any) -> None:
    """SQLite's own lower() folds ASCII only; searches must fold every script (MySQL does)."""
    if isinstance(dbapi_connection, sqlite3.Connection):
        dbapi_connection.create_function(
            "lower", 1, lambda text: text.lower() if isinstance(text, str) else text,
            deterministic=True)
