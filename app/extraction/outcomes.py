"""One outcome row per job: what became of it, why, at what cost, and what it changed.

A finished job's outcome is written in the same transaction as its memory changes; a job that
failed writes it in a transaction of its own after the rollback. The unique job id makes
"exactly one" hold even when a killed worker's parent reports a job that had already finished.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field, fields, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from sqlalchemy.exc import IntegrityError

from app import metrics
from app.database.batches import written
from app.database.conflicts import retry_conflicts
from app.db_types import utcnow
from app.extraction.llm import ChatModel, why_unusable
from app.extraction.models import OUTCOME_ROW
from app.memory.memories import Learned
from app.memory.rules import Group
from app.unit_of_work import UnitOfWork

if TYPE_CHECKING:
    from app.extraction.llm import Completion

log = logging.getLogger(__name__)


class JobKindName(StrEnum):
    """The kinds of job (the outcome's `kind`)."""

    EXTRACTION = "extraction"
    CONSOLIDATION = "consolidation"


# Jobs that could not run because of how the service is set up: an operator must act.
CONFIGURATION_REASONS = frozenset({"no_model", "llm_api_key_missing"})


class OutcomeStatus(StrEnum):
    SUCCEEDED = "succeeded"
    SKIPPED = "skipped"
    ABANDONED = "abandoned"
    FAILED = "failed"


@dataclass
class Outcome:
    """An outcome being filled in while the job runs."""

    kind: str
    job_id: str
    user_id: int
    attempts: int
    event_id: str | None = None
    session_id: int | None = None
    status: OutcomeStatus = OutcomeStatus.FAILED
    reason: str = "unfinished"
    model: str | None = None
    prompt_chars: int | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    inserted: int = 0
    touched: int = 0
    updated: int = 0
    dropped: int = 0
    demoted: int = 0
    stale: int = 0  # touches/updates of rows changed since the model saw them
    # Facts (extraction) or merges (consolidation) refused for holding a credential (SPEC §11).
    secrets_dropped: int = 0
    # Consolidation jobs: the group (scope, project key) and what became of its rows.
    scope: str | None = None
    project_key: str | None = None
    rows_in: int | None = None
    rows_out: int | None = None
    merges: int | None = None
    drops: int | None = None
    started: float = field(default_factory=time.monotonic)
    # Not recorded: what the D15 trigger looks at — the groups an extraction inserted into or
    # rewrote, and the user's ACTIVE memories when it ended (None: not known).
    written_groups: set[Group] = field(default_factory=set)
    active: int | None = None

    def count_tokens(self, completion: Completion) -> None:
        """The token usage the model reported for its answer."""
        self.prompt_tokens = completion.prompt_tokens
        self.completion_tokens = completion.completion_tokens
        self.total_tokens = completion.total_tokens

    def add(self, learned: Learned) -> None:
        """What an extraction changed."""
        self.inserted += learned.inserted
        self.touched += learned.touched
        self.updated += learned.updated
        self.dropped += learned.dropped
        self.demoted += learned.demoted
        self.stale += learned.stale
        self.secrets_dropped += learned.secrets_dropped
        self.written_groups |= learned.written_groups
        self.active = learned.active

    def finish(self, status: OutcomeStatus, reason: str) -> None:
        self.status, self.reason = status, reason

    def snapshot(self) -> Outcome:
        """What the outcome says now, to go back to (`rewind`) when the work after this point
        is rolled back and done again."""
        return replace(self, written_groups=set(self.written_groups))

    def rewind(self, snapshot: Outcome) -> None:
        for name in (f.name for f in fields(self)):
            setattr(self, name, getattr(snapshot, name))
        self.written_groups = set(snapshot.written_groups)

    @property
    def persisted(self) -> bool:
        """New information reached the memories (rows inserted or rewritten), which is what
        D15 consolidation waits for; touches and demotions alone are not."""
        return self.status is OutcomeStatus.SUCCEEDED and self.inserted + self.updated > 0

    @property
    def duration_ms(self) -> int:
        return int((time.monotonic() - self.started) * 1000)

    def stage(self, uow: UnitOfWork) -> None:
        """The row, inserted by `uow`'s commit (with the job's journal, one round trip)."""
        uow.insert(written(OUTCOME_ROW, {
            "kind": self.kind, "job_id": self.job_id, "event_id": self.event_id,
            "user_id": self.user_id, "session_id": self.session_id, "status": self.status.value,
            "reason": self.reason, "attempts": self.attempts, "model": self.model,
            "prompt_chars": self.prompt_chars, "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens, "total_tokens": self.total_tokens,
            "inserted": self.inserted, "touched": self.touched, "updated": self.updated,
            "dropped": self.dropped, "demoted": self.demoted, "stale": self.stale,
            "secrets_dropped": self.secrets_dropped, "duration_ms": self.duration_ms,
            "created_at": utcnow(), "scope": self.scope, "project_key": self.project_key,
            "rows_in": self.rows_in, "rows_out": self.rows_out, "merges": self.merges,
            "drops": self.drops}))

    def log(self) -> None:
        """Report a job whose outcome was committed: its structured line (ids, result and
        counts, never content) and its metrics."""
        self._count()
        level = (logging.WARNING if self.status is OutcomeStatus.FAILED
                 or self.reason in CONFIGURATION_REASONS else logging.INFO)
        if self.scope is not None:
            log.log(level, "event=job.finished kind=%s job=%s user=%s scope=%s project=%s "
                    "attempt=%d status=%s reason=%s model=%s rows_in=%s rows_out=%s merges=%s "
                    "drops=%s inserted=%d touched=%d dropped=%d secrets_dropped=%d "
                    "duration_ms=%d", self.kind, self.job_id, self.user_id, self.scope,
                    self.project_key, self.attempts, self.status, self.reason, self.model,
                    self.rows_in, self.rows_out, self.merges, self.drops, self.inserted,
                    self.touched, self.dropped, self.secrets_dropped, self.duration_ms)
            return
        log.log(level, "event=job.finished kind=%s job=%s event_id=%s user=%s session=%s "
                "attempt=%d status=%s reason=%s model=%s inserted=%d touched=%d updated=%d "
                "dropped=%d demoted=%d stale=%d secrets_dropped=%d persisted=%s duration_ms=%d",
                self.kind, self.job_id, self.event_id, self.user_id, self.session_id,
                self.attempts, self.status, self.reason, self.model, self.inserted, self.touched,
                self.updated, self.dropped, self.demoted, self.stale, self.secrets_dropped,
                self.persisted, self.duration_ms)


    def _count(self) -> None:
        metrics.JOBS.labels(kind=self.kind, status=self.status.value, reason=self.reason).inc()
        metrics.JOB_DURATION.labels(kind=self.kind).observe(self.duration_ms / 1000)
        if self.model is not None and self.total_tokens is not None:
            for kind, tokens in (("prompt", self.prompt_tokens), ("completion",
                                                                  self.completion_tokens)):
                metrics.LLM_TOKENS.labels(kind=self.kind, model=self.model,
                                          type=kind).inc(tokens or 0)
        if self.kind == JobKindName.CONSOLIDATION:
            for direction, rows in (("in", self.rows_in), ("out", self.rows_out)):
                metrics.CONSOLIDATION_ROWS.labels(direction=direction).inc(rows or 0)
            for op, count in (("merge", self.merges), ("drop", self.drops)):
                metrics.CONSOLIDATION_OPERATIONS.labels(op=op).inc(count or 0)


def runnable_model(outcome: Outcome, model: ChatModel | None) -> ChatModel | None:
    """`model` (as D10 resolved it) when it can be called, or None — with the outcome skipped
    for that reason — when none is configured or its key is missing: configuration, not a
    failure of the job."""
    reason = why_unusable(model)
    if reason is not None:
        outcome.finish(OutcomeStatus.SKIPPED, reason)
        return None
    return model


@retry_conflicts
def record(outcome: Outcome) -> None:
    """Commit the outcome in a transaction of its own."""
    with UnitOfWork() as uow:
        outcome.stage(uow)
        try:
            uow.commit()
        except IntegrityError:
            log.warning("event=job.outcome_exists kind=%s job=%s", outcome.kind, outcome.job_id)
            return
    outcome.log()


def record_lost(kind: str, job_id: str, payload: dict[str, Any], *, attempts: int,
                reason: str, ran_for_s: float) -> None:
    """The outcome of a job whose process died before it could write one (killed worker)."""
    scope = payload.get("scope")  # consolidation payloads name their group
    outcome = Outcome(kind=kind, job_id=job_id, user_id=payload["user_id"],
                      attempts=attempts, event_id=payload.get("event_id"),
                      session_id=payload.get("session_id"), scope=scope,
                      project_key=payload.get("project_key") if scope else None,
                      started=time.monotonic() - ran_for_s)
    outcome.finish(OutcomeStatus.FAILED, reason)
    record(outcome)
