"""The unit of work: the one place a database transaction commits or rolls back.

Two boundaries own a transaction — the web request's service call and the job runner — and each
does it the same way:

    with UnitOfWork() as uow:
        ...  # the domain reads and writes; the aggregate records its events in `uow`
        uow.commit()

Leaving the block without `commit()` (an exception, an early return) rolls back, so a failure
half-way changes nothing. The events the aggregate recorded are handled here once, whichever
writer made them (a user, extraction, consolidation): their journal rows go into the
transaction just before it commits, and the commit is bracketed for the context cache of every
user whose memories it changes.
"""

from __future__ import annotations

from types import TracebackType

from app.database import Statement, batch_in_session
from app.extensions import db
from app.memory import context, journal
from app.memory.events import Event


class UnitOfWork:
    def __init__(self) -> None:
        self.events: list[Event] = []
        self.rows: list[Statement] = []
        self._committed = False

    def __enter__(self) -> UnitOfWork:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if not self._committed:
            self.rollback()

    def record(self, event: Event) -> None:
        self.events.append(event)

    def insert(self, row: Statement) -> None:
        """A row the commit inserts with the journal, in the same round trip (a job's outcome)."""
        self.rows.append(row)

    def flush(self) -> None:
        """Send what a commit would — the pending changes, then the journal and the rows to
        insert in one round trip — but keep the transaction open."""
        db.session.flush()
        deleted = journal.purge(self.events)
        rows = journal.rows(self.events, deleted) + self.rows
        self.events, self.rows = [], []
        if rows:
            batch_in_session(*rows)

    def commit(self) -> None:
        changed_users = {event.user_id for event in self.events}
        self.flush()
        # Readers of these users' context blocks go to the database until the commit is done.
        with context.cache().writing(changed_users):
            db.session.commit()
        self._committed = True

    def rollback(self) -> None:
        """Undo everything since the last commit; the session stays usable."""
        db.session.rollback()
        self.events, self.rows = [], []
