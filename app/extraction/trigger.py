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
the same transaction that enqueues the jobs: it holds across workers and restarts, two workers
cannot both pass it, and when Redis refuses the jobs the rollback gives the claim back.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from datetime import timedelta

from redis.exceptions import RedisError
from sqlalchemy.exc import SQLAlchemyError

from app.db_types import utcnow
from app.extensions import db
from app.extraction.consolidation import ConsolidationJob
from app.extraction.models import ConsolidationState
from app.extraction.parser import MERGE_MIN_SOURCES
from app.extraction.queue import CONSOLIDATION, memory_queue
from app.memory import rules
from app.memory.models import MemoryItem
from app.memory.rules import Scope

log = logging.getLogger(__name__)

COOLDOWN = timedelta(hours=rules.CONSOLIDATE_COOLDOWN_HOURS)


def groups_due(user_id: int, written_groups: Collection[str | None]) -> list[str | None]:
    """The written groups that need consolidating (None: the USER group), USER first."""
    pool_over = MemoryItem.count_active(user_id) > rules.CONSOLIDATE_ACTIVE_THRESHOLD
    due: list[str | None] = []
    for key in sorted(written_groups, key=lambda k: (k is not None, k or "")):
        machine_rows, other_rows = MemoryItem.group_active_counts(user_id, key)
        scope = Scope.USER if key is None else Scope.PROJECT
        over_target = machine_rows + other_rows > rules.consolidation_target(scope)
        if machine_rows >= MERGE_MIN_SOURCES and (pool_over or over_target):
            due.append(key)
    return due


def after_extraction(user_id: int, written_groups: Collection[str | None]) -> list[str]:
    """Enqueue consolidation of the due groups when the cooldown allows; the job ids.

    The extraction is committed already: a failure here is logged and costs nothing but this
    consolidation.
    """
    try:
        now = utcnow()
        # Once a day at most: within the cooldown, which is most of the time for a user with
        # enough memories to consolidate, nothing else needs counting.
        if ConsolidationState.cooling_down(user_id, now, COOLDOWN):
            db.session.rollback()
            log.info("event=consolidation.cooling_down user=%s", user_id)
            return []
        groups = groups_due(user_id, written_groups)
        if not groups:
            db.session.rollback()
            return []
        if not ConsolidationState.claim(user_id, now, COOLDOWN):
            db.session.rollback()
            log.info("event=consolidation.cooling_down user=%s", user_id)
            return []
        job_ids = []
        for key in groups:
            job = ConsolidationJob(user_id, key)
            job_ids.append(job.job_id(now))
            memory_queue().enqueue(CONSOLIDATION, job.payload(), job_ids[-1])
        db.session.commit()
    except (SQLAlchemyError, RedisError) as exc:
        db.session.rollback()
        log.warning("event=consolidation.trigger_failed user=%s error=%s", user_id,
                    type(exc).__name__)
        return []
    log.info("event=consolidation.enqueued user=%s jobs=%s", user_id, ",".join(job_ids))
    return job_ids
