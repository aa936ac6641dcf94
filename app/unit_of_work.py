"""The unit of work: the one place a database transaction commits or rolls back.

Two boundaries own a transaction — the web request's service call and the job runner — and each
does it the same way:

    with UnitOfWork() as uow:
        ...  # the domain reads and writes; the aggregate records its events in `uow`
        uow.commit()

Leaving the block without `commit()` (an exception, an early return) rolls back, so a failure
half-way changes nothing. The events the aggregate recorded are handled here once, whichever
writer made them (a user, extraction, consolidation), by the hooks the domain registered on the
app (`app.memory.init_app`): each flush hook turns them into the rows that go into the
transaction just before it commits (the journal), and each commit hook brackets the commit (the
context cache of every user whose memories it changes). This module knows no domain: it only
runs what was registered, in the order it was registered.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from flask import Flask, current_app

from app.database.batches import Read, Written, batch_all
from app.extensions import db

EXTENSION = "unit_of_work"

# Given the transaction's events: send what must go before its rows, and return the rows to
# insert, which go in one round trip with every other hook's and the unit of work's own.
FlushHook = Callable[[Sequence[Any]], list[Read[Written]]]
# Given the transaction's events: a context manager the commit runs inside.
CommitHook = Callable[[Sequence[Any]], AbstractContextManager[Any]]


@dataclass
class Hooks:
    flush: list[FlushHook] = field(default_factory=list)
    commit: list[CommitHook] = field(default_factory=list)


def _hooks(app: Flask) -> Hooks:
    return app.extensions.setdefault(EXTENSION, Hooks())


def on_flush(app: Flask, hook: FlushHook) -> None:
    """Have `hook` turn each transaction's events into rows, just before it commits."""
    _hooks(app).flush.append(hook)


def on_commit(app: Flask, hook: CommitHook) -> None:
    """Have each commit run inside `hook(events)`."""
    _hooks(app).commit.append(hook)


# An app that registered nothing (no domain wired in): events are kept and handed to no one.
_NO_HOOKS = Hooks()


class UnitOfWork:
    def __init__(self) -> None:
        self.events: list[Any] = []
        self.rows: list[Read[Written]] = []
        self._committed = False

    def __enter__(self) -> UnitOfWork:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if not self._committed:
            self.rollback()

    @staticmethod
    def _registered() -> Hooks:
        return current_app.extensions.get(EXTENSION, _NO_HOOKS)

    def record(self, event: Any) -> None:
        self.events.append(event)

    def insert(self, row: Read[Written]) -> None:
        """A row the commit inserts with the journal, in the same round trip (a job's outcome)."""
        self.rows.append(row)

    def flush(self) -> None:
        """Send what a commit would — the pending changes, then the hooks' rows and the rows to
        insert in one round trip — but keep the transaction open."""
        db.session.flush()
        events = self.events
        rows = [row for hook in self._registered().flush for row in hook(events)] + self.rows
        self.events, self.rows = [], []
        if rows:
            batch_all(db.session.connection(), rows)

    def commit(self) -> None:
        events = list(self.events)
        self.flush()
        with ExitStack() as around:
            for hook in self._registered().commit:
                around.enter_context(hook(events))
            db.session.commit()
        self._committed = True

    def rollback(self) -> None:
        """Undo everything since the last commit; the session stays usable."""
        db.session.rollback()
        self.events, self.rows = [], []
