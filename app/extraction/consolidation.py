"""The D15 consolidation of one memory group (seed §10.3): merge, keep or drop machine rows.

Read phase: the toggle (D9: a user who switched automatic memory off gets no machine rewrites
either), the group's machine-made ACTIVE rows (AUTO, CONSOLIDATED) with ids — MANUAL and
DISMISSED rows are never read — and the model (D10, the extraction model). Then one chat
completion with no transaction open, whose answer is validated as a whole (`parser.parse_plan`).

Write phase, under the user's row lock, in the caller's transaction (committed together with the
outcome), so the group changes completely or not at all:

1. every row the plan names is re-selected FOR UPDATE and must still be what the model saw:
   ACTIVE, machine-made, in this group, same content. Otherwise the group is abandoned.
2. A merge whose wording is already a DISMISSED row (the user rejected those very words) is
   refused and its sources are kept.
3. Merge sources and dropped rows are deleted — only machine-made ACTIVE rows of this group,
   every one of them, or the group fails.
4. Each merge is inserted as a CONSOLIDATED row (origin_session_id NULL, it comes from several
   sessions) that inherits its sources' history — created when the oldest was, last confirmed
   when the newest was — so consolidating does not reorder what is injected. Deleting first
   means a merge may reuse a source's exact words. When an ACTIVE row already says exactly the
   merged words, nothing is inserted: a machine row's updated_at is carried forward, a MANUAL
   row is left exactly as it is.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from flask import current_app
from sqlalchemy.exc import IntegrityError

from app.auth.models import User
from app.extensions import db
from app.extraction import llm, parser, prompt
from app.extraction.outcomes import Outcome, OutcomeStatus
from app.extraction.parser import MERGE_MIN_SOURCES, Merge, Plan
from app.memory import rules
from app.memory.models import MemoryItem, UserMemoryPreference
from app.memory.rules import MACHINE_SOURCES, Scope, Source, Status

log = logging.getLogger(__name__)

@dataclass(frozen=True)
class ConsolidationJob:
    """One group of one user; the payload is the user id and the group's key, nothing else."""

    user_id: int
    project_key: str | None  # None: the USER group

    @property
    def scope(self) -> Scope:
        return Scope.USER if self.project_key is None else Scope.PROJECT

    @classmethod
    def from_payload(cls, payload: dict[str, Any]) -> ConsolidationJob:
        project = payload.get("scope") == Scope.PROJECT.value
        return cls(user_id=payload["user_id"],
                   project_key=payload["project_key"] if project else None)

    def payload(self) -> dict[str, Any]:
        return {"user_id": self.user_id, "scope": self.scope.value,
                "project_key": self.project_key}

    def job_id(self, started: datetime) -> str:
        # Project keys are free text; RQ ids allow letters, digits, '-' and '_' only.
        group = "user" if self.project_key is None else \
            "p" + hashlib.sha1(self.project_key.encode("utf-8")).hexdigest()[:16]
        return f"consolidate-{self.user_id}-{int(started.timestamp() * 1000)}-{group}"


class _ConcurrentWrite(Exception):
    """The merged words appeared meanwhile through a writer outside the user lock."""


def consolidate(job: ConsolidationJob, outcome: Outcome) -> None:
    """Consolidate one group, filling `outcome`; changes are left uncommitted."""
    if not UserMemoryPreference.auto_capture_enabled_for(job.user_id):
        outcome.finish(OutcomeStatus.SKIPPED, "auto_capture_disabled")
        return
    rows = MemoryItem.consolidation_inputs(job.user_id, job.project_key)
    outcome.rows_in = outcome.rows_out = len(rows)
    outcome.merges = outcome.drops = 0
    if len(rows) < MERGE_MIN_SOURCES:
        outcome.finish(OutcomeStatus.SKIPPED, "too_few_rows")  # nothing to merge: no LLM call
        return
    model = llm.resolve_model()
    if model is None:
        outcome.finish(OutcomeStatus.SKIPPED, "no_model")
        return
    # The model is told how far the machine rows must shrink for the whole group (MANUAL rows
    # included, since they are injected too) to reach its target.
    _, other_rows = MemoryItem.group_active_counts(job.user_id, job.project_key)
    budget = max(rules.consolidation_target(job.scope) - other_rows, 1)
    seen = {row.id: row.dedup_hash for row in rows}
    messages = prompt.build_consolidation_messages(
        project_key=job.project_key, budget=budget, rows=[(r.id, r.content) for r in rows])
    # Nothing stays open while the model thinks: no connection, no transaction, no lock.
    db.session.close()

    outcome.model, outcome.prompt_chars = model.model, prompt.prompt_chars(messages)
    try:
        completion = llm.complete(model, messages, current_app.config["MEMORY_LLM_TIMEOUT_S"])
        outcome.count_tokens(completion)
        plan = parser.parse_plan(completion.text, seen.keys())
    except (llm.LlmTimeout, llm.LlmInvalidResponse, parser.InvalidOutput) as exc:
        outcome.finish(OutcomeStatus.ABANDONED, exc.reason)  # the group stays as it is
        return
    if not plan.changes_anything:
        outcome.finish(OutcomeStatus.SUCCEEDED, "nothing_to_consolidate")
        return
    try:
        _GroupWrite(job, outcome, seen).apply(plan)
    except _ConcurrentWrite:
        db.session.rollback()
        outcome.finish(OutcomeStatus.ABANDONED, "concurrent_write")


@dataclass
class _GroupWrite:
    """The write phase of one group: Core statements in the caller's transaction."""

    job: ConsolidationJob
    outcome: Outcome
    seen: dict[int, str]  # id → dedup_hash of every row the model was shown

    def apply(self, plan: Plan) -> None:
        User.lock(self.job.user_id)
        current = self._lock_rows(plan.referenced)
        if any(current.get(i) is None or current[i].dedup_hash != self.seen[i]
               for i in plan.referenced):
            # Edited, dismissed, demoted or deleted since the model saw it: the plan may rest
            # on words that are no longer there.
            self.outcome.finish(OutcomeStatus.ABANDONED, "inputs_changed")
            return
        merges = [m for m in plan.merges if not self._rejected_wording(m)]
        deleted = [i for m in merges for i in m.source_ids] + plan.drops
        self._delete(deleted)
        inserted = touched = 0
        for merge in merges:
            sources = [current[i] for i in merge.source_ids]
            new_row, carried = self._write(merge, sources)
            inserted, touched = inserted + new_row, touched + carried
        # Counted only once every statement succeeded: a failed group reports no changes.
        self.outcome.inserted, self.outcome.touched = inserted, touched
        self.outcome.dropped = len(plan.merges) - len(merges)  # refused merges
        self.outcome.merges, self.outcome.drops = len(merges), len(plan.drops)
        self.outcome.rows_out = len(self.seen) - len(deleted) + inserted
        changed = bool(merges or plan.drops)
        self.outcome.finish(OutcomeStatus.SUCCEEDED,
                            "consolidated" if changed else "nothing_to_consolidate")

    # ---- statements ------------------------------------------------------------------

    def _digest(self, content: str) -> str:
        return rules.dedup_hash(self.job.scope, self.job.project_key, content)

    def _machine_active_in_group(self) -> list[Any]:
        return [MemoryItem.user_id == self.job.user_id, MemoryItem.status == Status.ACTIVE,
                MemoryItem.machine_made(), MemoryItem.scope == self.job.scope,
                MemoryItem.project_key == (self.job.project_key or "")]

    def _lock_rows(self, ids: list[int]) -> dict[int, sa.Row]:
        """The named rows that are still machine-made, ACTIVE and in this group, locked."""
        rows = db.session.execute(
            sa.select(MemoryItem.id, MemoryItem.dedup_hash, MemoryItem.created_at,
                      MemoryItem.updated_at)
            .where(MemoryItem.id.in_(ids), *self._machine_active_in_group())
            .with_for_update())
        return {row.id: row for row in rows}

    def _by_hash(self, digest: str) -> sa.Row | None:
        return db.session.execute(
            sa.select(MemoryItem.id, MemoryItem.status, MemoryItem.source, MemoryItem.updated_at)
            .where(MemoryItem.user_id == self.job.user_id, MemoryItem.dedup_hash == digest)
            .with_for_update()).first()

    def _rejected_wording(self, merge: Merge) -> bool:
        """True when a DISMISSED row has these exact words: the merge is refused, its sources
        kept (never resurrected, seed D3; never lost either)."""
        clash = self._by_hash(self._digest(merge.content))
        if clash is None or clash.status != Status.DISMISSED:
            return False
        log.info("event=consolidation.merge_refused user=%s reason=dismissed_wording item=%s",
                 self.job.user_id, clash.id)
        return True

    def _delete(self, ids: list[int]) -> None:
        if not ids:
            return
        result = db.session.execute(
            sa.delete(MemoryItem)
            .where(MemoryItem.id.in_(ids), *self._machine_active_in_group())
            .execution_options(synchronize_session=False))
        if result.rowcount != len(ids):
            # The rows are locked by us, so this is a bug: fail the group, never half of it.
            raise RuntimeError(f"deleted {result.rowcount} of {len(ids)} locked rows")

    def _write(self, merge: Merge, sources: list[sa.Row]) -> tuple[int, int]:
        """Insert the merged row, or keep the ACTIVE row that already says it: (1, 0) for an
        insert, (0, 1) when a machine row's updated_at moved, else (0, 0)."""
        digest = self._digest(merge.content)
        created_at = min(s.created_at for s in sources)
        updated_at = max(s.updated_at for s in sources)
        existing = self._by_hash(digest)
        if existing is None:
            try:
                db.session.execute(sa.insert(MemoryItem).values(
                    user_id=self.job.user_id, scope=self.job.scope.value,
                    project_key=self.job.project_key or "", content=merge.content,
                    source=Source.CONSOLIDATED.value, status=Status.ACTIVE.value,
                    dedup_hash=digest, origin_session_id=None, created_at=created_at,
                    updated_at=updated_at))
            except IntegrityError as exc:
                raise _ConcurrentWrite from exc
            return 1, 0
        if existing.status != Status.ACTIVE:
            # Dismissed since the check above (a writer outside the user lock): the sources are
            # gone already, so the whole group goes back.
            raise _ConcurrentWrite
        if existing.source not in MACHINE_SOURCES or existing.updated_at >= updated_at:
            return 0, 0  # a MANUAL row is never changed; a newer row needs nothing
        db.session.execute(
            sa.update(MemoryItem).where(MemoryItem.id == existing.id)
            .values(updated_at=updated_at).execution_options(synchronize_session=False))
        return 0, 1
