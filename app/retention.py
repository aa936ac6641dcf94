"""Retention: `flask --app wsgi prune` removes old operational rows, never what idempotency or
provenance still needs.

- `webhook_event`: the row of an accepted eventId is what makes a repeated delivery answer
  `duplicate_event` (SPEC §8). Once a row is gone, a delivery of that eventId would be taken as
  new, so rows are kept longer than the platform can possibly retry a delivery: at least
  MIN_EVENT_DAYS, by default DEFAULT_EVENT_DAYS.
- `memory_job_outcome`: one row per job, which a retried job finds to change nothing twice; a job
  is retried within minutes (MEMORY_RETRY_DELAYS_S), so outcomes older than a day are history
  only (the 任务记录 page, `/api/v1/admin/outcomes`). By default DEFAULT_OUTCOME_DAYS.
- `memory_event`, the journal: it is the provenance of the memories that exist, so a row of an
  existing memory is never removed, however old (a memory deleted for good takes its rows with
  it already). Only rows whose memory is gone — which the service itself never leaves, but a
  hand edit or a restore of part of a backup can — are removed.
- `memory_access_log` (who read a user's memories): kept unless `--access-log-days` is given.

Rows go in batches of BATCH by primary key, each batch its own short transaction, so the
service keeps answering while a large backlog is pruned. The ages are read from the rows'
timestamps; the first run after a long time scans each table once to find where to stop.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import click
import sqlalchemy as sa
from flask.cli import with_appcontext

from app.db_types import utcnow
from app.extensions import db

MIN_EVENT_DAYS = 2
DEFAULT_EVENT_DAYS = 30
MIN_OUTCOME_DAYS = 1
DEFAULT_OUTCOME_DAYS = 90
MIN_ACCESS_LOG_DAYS = 1
BATCH = 5000


@dataclass(frozen=True)
class Pruned:
    webhook_events: int
    job_outcomes: int
    orphan_journal_rows: int
    access_log_rows: int


def _table(name: str) -> sa.Table:
    return db.metadata.tables[name]


def _older_than(table: sa.Table, column: str, cutoff: datetime, *, dry_run: bool) -> int:
    """Delete the rows of `table` whose `column` is before `cutoff`, in batches of ids up to the
    newest such id (ids grow with time, so each batch is a primary-key range)."""
    stamp = table.c[column]
    with db.engine.begin() as connection:
        last = connection.scalar(sa.select(sa.func.max(table.c.id)).where(stamp < cutoff))
        if last is None:
            return 0
        if dry_run:
            return connection.scalar(sa.select(sa.func.count()).select_from(table)
                                     .where(stamp < cutoff, table.c.id <= last)) or 0
        first = connection.scalar(sa.select(sa.func.min(table.c.id)).where(stamp < cutoff))
    removed = 0
    low = first - 1
    while low < last:
        high = min(low + BATCH, last)
        with db.engine.begin() as connection:
            removed += connection.execute(
                table.delete().where(table.c.id > low, table.c.id <= high, stamp < cutoff)
            ).rowcount
        low = high
    return removed


def _orphan_journal_rows(*, dry_run: bool) -> int:
    """Journal rows whose memory no longer exists."""
    events, items = _table("memory_event"), _table("memory_item")
    orphan = ~sa.exists().where(items.c.id == events.c.memory_id)
    removed = 0
    while True:
        with db.engine.begin() as connection:
            ids = connection.scalars(sa.select(events.c.id).where(orphan).order_by(events.c.id)
                                     .limit(BATCH)).all()
            if not ids or dry_run:
                return removed + len(ids)
            removed += connection.execute(events.delete().where(events.c.id.in_(ids))).rowcount


def prune(*, event_days: int, outcome_days: int, access_log_days: int | None,
          dry_run: bool = False, now: datetime | None = None) -> Pruned:
    """Remove what the retention rules allow (see the module's docstring); the counts."""
    if event_days < MIN_EVENT_DAYS:
        raise ValueError(f"--events-days must be at least {MIN_EVENT_DAYS}: a webhook event row "
                         "is what answers a repeated delivery duplicate_event")
    if outcome_days < MIN_OUTCOME_DAYS:
        raise ValueError(f"--outcomes-days must be at least {MIN_OUTCOME_DAYS}: a retried job "
                         "finds its outcome row")
    if access_log_days is not None and access_log_days < MIN_ACCESS_LOG_DAYS:
        raise ValueError(f"--access-log-days must be at least {MIN_ACCESS_LOG_DAYS}")
    now = now or utcnow()
    return Pruned(
        webhook_events=_older_than(_table("webhook_event"), "received_at",
                                   now - timedelta(days=event_days), dry_run=dry_run),
        job_outcomes=_older_than(_table("memory_job_outcome"), "created_at",
                                 now - timedelta(days=outcome_days), dry_run=dry_run),
        orphan_journal_rows=_orphan_journal_rows(dry_run=dry_run),
        access_log_rows=0 if access_log_days is None else _older_than(
            _table("memory_access_log"), "at", now - timedelta(days=access_log_days),
            dry_run=dry_run),
    )


@click.command("prune")
@click.option("--events-days", type=int, default=DEFAULT_EVENT_DAYS, show_default=True,
              help="Keep webhook events this many days: longer than the platform retries a "
                   f"delivery (at least {MIN_EVENT_DAYS}).")
@click.option("--outcomes-days", type=int, default=DEFAULT_OUTCOME_DAYS, show_default=True,
              help=f"Keep job outcomes this many days (at least {MIN_OUTCOME_DAYS}).")
@click.option("--access-log-days", type=int,
              help="Also remove audit-read records older than this (default: keep them all).")
@click.option("--dry-run", is_flag=True, help="Count what would go; remove nothing.")
@with_appcontext
def prune_command(events_days: int, outcomes_days: int, access_log_days: int | None,
                  dry_run: bool) -> None:
    """Remove old webhook events, job outcomes and orphaned journal rows; the journal of every
    existing memory (its provenance) is kept whatever its age."""
    try:
        pruned = prune(event_days=events_days, outcome_days=outcomes_days,
                       access_log_days=access_log_days, dry_run=dry_run)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    verb = "would remove" if dry_run else "removed"
    click.echo(f"{verb}: webhook_event={pruned.webhook_events} "
               f"memory_job_outcome={pruned.job_outcomes} "
               f"memory_event(orphaned)={pruned.orphan_journal_rows} "
               f"memory_access_log={pruned.access_log_rows}")
