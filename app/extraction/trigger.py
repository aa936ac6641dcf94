"""When D15 consolidation runs (seed §10.3): checked after an extraction committed new facts.

All three must hold:
1. the extraction persisted something (rows inserted or rewritten; the caller checks);
2. the user has more than 150 ACTIVE rows, or a group the extraction wrote into holds more
   ACTIVE rows (MANUAL ones included: all are injected) than its target (USER 30, project 60);
3. the user's last consolidation started at least 24 hours ago.

The groups consolidated are the ones the extraction wrote into: each of them when the user's
pool is over 150, else those over their target. A group with fewer than 2 machine-made rows has
nothing to merge and is left out. One job per group, so each has one LLM call, one transaction,
one outcome and its own retries.

The cooldown lives in the database (`ConsolidationState`), claimed by a conditional statement in
the caller's transaction, which also enqueues the jobs and commits only when they are all
queued: it holds across workers and restarts, two workers cannot both pass it, and when Redis
refuses the jobs the rollback gives the claim back.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from datetime import timedelta

from app.database.batches import Read, Row, read
from app.db_types import utcnow
from app.extraction.consolidation import ConsolidationJob
from app.extraction.models import LAST_STARTED, ConsolidationState
from app.extraction.queue import job_kinds, memory_queue
from app.memory import repository, rules
from app.memory.rules import Group

log = logging.getLogger(__name__)

COOLDOWN = timedelta(hours=rules.CONSOLIDATE_COOLDOWN_HOURS)


def groups_due(user_id: int, written_groups: Collection[Group]) -> list[Group]:
    """The written groups that need consolidating, USER first."""
    pool_over = repository.count_active(user_id) > rules.CONSOLIDATE_ACTIVE_THRESHOLD
    due: list[Group] = []
    for group in sorted(written_groups, key=lambda g: (g.project_key is not None, g.key)):
        machine_rows, other_rows = repository.group_counts(user_id, group)
        over_target = machine_rows + other_rows > group.consolidation_target
        if machine_rows >= rules.MERGE_MIN_SOURCES and (pool_over or over_target):
            due.append(group)
    return due


def may_be_due(active: int | None) -> bool:
    """Whether anything can be due for a user with `active` ACTIVE memories (None: not known).
    No group holds more rows than its user, so with no more than the smallest group target
    none is over its own and the pool is far from its threshold: nothing to count."""
    smallest = min(rules.CONSOLIDATE_USER_TARGET, rules.CONSOLIDATE_PROJECT_TARGET)
    return active is None or active > smallest


def cooldown(user_id: int) -> Read[bool]:
    """`cooling_down`, as a read of the job's batch."""
    return read(LAST_STARTED, {"user_id": user_id}, lambda rows: cooling_down(user_id, rows))


def cooling_down(user_id: int, rows: Sequence[Row]) -> bool:
    """Whether the user's last consolidation (LAST_STARTED's rows) started less than a day ago,
    which spares most extractions the counts below (`after_extraction`'s claim still
    decides)."""
    cooling = ConsolidationState.cooling_down(rows, utcnow(), COOLDOWN)
    if cooling:
        log.info("event=consolidation.cooling_down user=%s", user_id)
    return cooling


def after_extraction(user_id: int, written_groups: Collection[Group]) -> list[str]:
    """Claim the cooldown and enqueue consolidation of the due groups; the job ids (none when
    nothing is due). The caller commits when there are some."""
    now = utcnow()
    groups = groups_due(user_id, written_groups)
    if not groups:
        return []
    if not ConsolidationState.claim(user_id, now, COOLDOWN):
        log.info("event=consolidation.cooling_down user=%s", user_id)
        return []
    job_ids = []
    for group in groups:
        job = ConsolidationJob(user_id, group)
        job_ids.append(job.job_id(now))
        memory_queue().enqueue(job_kinds().consolidation, job.payload(), job_ids[-1])
    log.info("event=consolidation.enqueued user=%s jobs=%s", user_id, ",".join(job_ids))
    return job_ids
