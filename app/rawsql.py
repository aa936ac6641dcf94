"""Prebuilt statements run on pooled DB-API connections, for the service's two hot paths.

The platform calls two endpoints for every session: the context read when one starts and the
completion webhook when one ends. Through the ORM session, building and compiling their few
statements per request cost several times their round trips. Here a statement is built once at
import, compiled once per dialect, and executed on a raw connection of an engine's pool;
DB-API errors come out as SQLAlchemy's, so callers catch IntegrityError as usual and the app
still answers 503 when the database is down.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Dialect
from sqlalchemy.pool import PoolProxiedConnection
from sqlalchemy.sql import Executable


@dataclass(frozen=True)
class Compiled:
    sql: str
    defaults: dict[str, Any]  # literal values the statement was built with (status, LIMIT…)
    order: tuple[str, ...] | None  # parameter order, for positional paramstyles (SQLite)

    def values(self, params: dict[str, Any]) -> dict[str, Any] | tuple:
        merged = {**self.defaults, **params}
        return tuple(merged[name] for name in self.order) if self.order is not None else merged


_compiled: dict[tuple[int, str], Compiled] = {}


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


def wrap(exc: Exception, dialect: Dialect, sql: str | None = None, values: Any = None,
         invalidated: bool = False) -> Exception:
    """The SQLAlchemy exception for a DB-API one (IntegrityError, OperationalError, …)."""
    return sa.exc.DBAPIError.instance(sql, values, exc, dialect.loaded_dbapi.Error,
                                      dialect=dialect, connection_invalidated=invalidated)


def connect(engine: sa.Engine) -> PoolProxiedConnection:
    """A connection of the engine's pool; a failed connect is a SQLAlchemy error too."""
    try:
        return engine.raw_connection()
    except engine.dialect.loaded_dbapi.Error as exc:
        raise wrap(exc, engine.dialect) from exc
