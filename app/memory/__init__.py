"""The memory domain: one user's memories (`memories.UserMemories`), their rules, their SQL
(`repository`), their journal and the context block built from them."""

from __future__ import annotations

from flask import Flask


def init_app(app: Flask) -> None:
    """The context cache, and what every unit of work does with the events the aggregate
    records: the journal rows go into the transaction, and the commit is bracketed for the
    context cache. Registered here, so the unit of work needs to know nothing of this domain."""
    # Imported here: every module of the package (rules, which `app.auth` imports, too) loads
    # this file first, and these pull in the database layer.
    from app import unit_of_work
    from app.memory import context, journal

    context.init_app(app)
    unit_of_work.on_flush(app, journal.flush_rows)
    unit_of_work.on_commit(app, context.around_commit)
