"""The engines of the two hot paths, besides the ORM's.

The platform calls two endpoints for every agent session: the context read when one starts and
the completion webhook when one ends. Each has an engine of its own:

- `reads`: AUTOCOMMIT, for the context read and a job's inputs: no transaction to end at all;
- `writes`: the webhook's; each delivery is one `writes.begin()` block.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from flask import Flask, current_app

from app.database.batches import AUTOCOMMIT
from app.database.pools import guard
from app.extensions import db

EXTENSION = "hot_engines"


@dataclass(frozen=True)
class HotEngines:
    reads: sa.Engine  # AUTOCOMMIT: the context read
    writes: sa.Engine  # the webhook's transactions

    def dispose(self) -> None:
        self.reads.dispose()
        if self.writes is not self.reads:
            self.writes.dispose()

    def pools(self) -> list[sa.pool.Pool]:
        return [self.reads.pool] + ([] if self.writes is self.reads else [self.writes.pool])


def init_app(app: Flask, orm_engine_options: dict[str, Any]) -> None:
    url = app.config["SQLALCHEMY_DATABASE_URI"]
    # No ping on checkout (a round trip): a connection the server dropped fails its first
    # statement, which invalidates the pool (`batches`), and the unit of work is run again
    # (`conflicts.retry_conflicts`; the webhook's caller does, see `intake.receive`).
    options = {k: v for k, v in orm_engine_options.items()
               if k not in ("isolation_level", "pool_pre_ping", "pool_reset_on_return")}
    read_options = dict(options)
    if "connect_args" in options and url.startswith(("mysql", "mariadb")):
        # PyMySQL turns autocommit off as it connects, unless told, and SQLAlchemy then on
        # again: two round trips for each new connection, and a work horse opens one per job.
        read_options["connect_args"] = {**options["connect_args"], "autocommit": True}
    reads = guard(sa.create_engine(url, isolation_level="AUTOCOMMIT",
                                   pool_reset_on_return=None, **read_options)
                  ).execution_options(**{AUTOCOMMIT: True})
    if url.startswith("sqlite"):
        # One local file and no round trips: the webhook needs no pool of its own, and SQLite's
        # locking stays the ORM engine's.
        with app.app_context():
            writes = db.engine
    else:
        writes = guard(sa.create_engine(
            url, pool_reset_on_return=None,
            isolation_level=orm_engine_options.get("isolation_level"), **options))
    app.extensions[EXTENSION] = HotEngines(reads, writes)


def hot_engines() -> HotEngines:
    engines: HotEngines = current_app.extensions[EXTENSION]
    return engines
