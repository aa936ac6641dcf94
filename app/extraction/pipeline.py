"""The extraction rules (seed §5.6, §10.1, §10.2), applied to one finished task.

Read phase: toggle (D9), input (D8), short-circuit (D11), model (D10), comparison and negative
sets (D13). Then one chat completion with no transaction open. Then the write phase, under the
user's row lock so the 200 ACTIVE cap is exact however many workers run: every candidate goes
through the D13 protocol and D14, and the changes are left staged for the caller to commit
together with the outcome, so a job either changes everything it decided or nothing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from flask import current_app
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from app.auth.models import User
from app.db_types import utcnow
from app.extensions import db
from app.extraction import llm, parser, prompt
from app.extraction.models import ConsolidationState
from app.extraction.outcomes import Outcome, OutcomeStatus
from app.extraction.parser import Action, Candidate, FactType
from app.extraction.prompt import KnownMemory
from app.memory import rules
from app.memory.models import MemoryItem, UserMemoryPreference
from app.memory.rules import Scope, Source, Status
from app.memory.service import bot_project_keys

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ExtractionJob:
    """The job payload: ids and the two texts (already reduced to text parts by the webhook)."""

    user_id: int
    session_id: int
    event_id: str | None
    project_key: str | None
    user_message: str | None
    assistant_message: str | None

    @classmethod
    def from_payload(cls, payload: dict[str, Any]) -> ExtractionJob:
        return cls(user_id=payload["user_id"], session_id=payload["session_id"],
                   event_id=payload.get("event_id"), project_key=payload.get("project_key"),
                   user_message=payload.get("user_message"),
                   assistant_message=payload.get("assistant_message"))


@dataclass(frozen=True)
class Known:
    """What the model is shown: the comparison set (with ids) and the negative set."""

    comparison: list[KnownMemory]
    dismissed: list[str]
    degraded: bool = False

    def ids_in(self, project_key: str | None) -> set[int]:
        """Ids the model may reference for a candidate of this group (None: the USER group)."""
        scope = Scope.USER if project_key is None else Scope.PROJECT
        return {m.id for m in self.comparison
                if m.scope == scope and m.project_key == (project_key or "")}


def _clip(text: str) -> str:
    """D8: each side of the conversation is cut to EXTRACT_INPUT_MAX code points."""
    return text.strip()[:rules.EXTRACT_INPUT_MAX]


def _known(user_id: int, project_key: str | None) -> Known:
    try:
        rows = MemoryItem.comparison_set(user_id, project_key)
        dismissed = MemoryItem.negative_set(user_id, project_key)
    except SQLAlchemyError as exc:
        # Seed §10.1/§10.6: a failed read degrades, it does not block. With an empty comparison
        # set every touch/update is unreferenceable and the exact-hash pre-check is the dedup.
        db.session.rollback()
        log.warning("event=extraction.comparison_set_failed user=%s error=%s", user_id,
                    type(exc).__name__)
        return Known([], [], degraded=True)
    return Known([KnownMemory(r.id, r.scope, r.project_key, r.content) for r in rows],
                 dismissed)


def extract(job: ExtractionJob, outcome: Outcome) -> None:
    """Run the rules for one job, filling `outcome`; memory changes are left uncommitted."""
    if not UserMemoryPreference.auto_capture_enabled_for(job.user_id):
        outcome.finish(OutcomeStatus.SKIPPED, "auto_capture_disabled")  # re-checked (D9)
        return
    user_text, assistant_text = job.user_message or "", job.assistant_message or ""
    if not rules.normalize(user_text) or not rules.normalize(assistant_text):
        outcome.finish(OutcomeStatus.SKIPPED, "missing_message")
        return
    if rules.length(rules.normalize(user_text)) < rules.EXTRACT_MIN_USER_MESSAGE:
        outcome.finish(OutcomeStatus.SKIPPED, "user_message_too_short")  # D11: no LLM call
        return
    model = llm.resolve_model()
    if model is None:
        outcome.finish(OutcomeStatus.SKIPPED, "no_model")
        return
    project_key = rules.valid_project_key(job.project_key, bot_project_keys())
    known = _known(job.user_id, project_key)
    # Nothing stays open while the model thinks: no connection, no transaction, no lock.
    db.session.close()

    messages = prompt.build_messages(project_key=project_key, comparison=known.comparison,
                                     dismissed=known.dismissed, user_message=_clip(user_text),
                                     assistant_message=_clip(assistant_text))
    outcome.model, outcome.prompt_chars = model.model, prompt.prompt_chars(messages)
    try:
        completion = llm.complete(model, messages, current_app.config["MEMORY_LLM_TIMEOUT_S"])
        outcome.count_tokens(completion)
        parsed = parser.parse(completion.text)
    except (llm.LlmTimeout, llm.LlmInvalidResponse, parser.InvalidOutput) as exc:
        outcome.finish(OutcomeStatus.ABANDONED, exc.reason)  # seed §5.6 step 4: give up quietly
        return

    outcome.dropped = parsed.dropped
    if parsed.candidates:
        _Writes(job, outcome).apply(parsed.candidates, project_key, known)
    if known.degraded:
        reason = "comparison_set_unavailable"
    elif not parsed.candidates and not parsed.dropped:
        reason = "nothing_to_remember"
    else:
        reason = "applied"
    outcome.finish(OutcomeStatus.SUCCEEDED, reason)


def warm_up() -> None:
    """Run each statement of a job once, for a user who does not exist, and roll it all back.

    SQLAlchemy compiles a statement the first time a process runs it and caches the result.
    The RQ worker forks a work horse per job, and what a horse compiles dies with it: called in
    the worker before it forks, this gives every horse a warm cache (without it, compiling cost
    each job about as much as the rest of its database work).
    """
    nobody, group = 0, "warm-up"
    job = ExtractionJob(user_id=nobody, session_id=0, event_id=None, project_key=group,
                        user_message=None, assistant_message=None)
    outcome = Outcome(kind="extraction", job_id="warm-up", user_id=nobody, attempts=1)
    try:
        UserMemoryPreference.auto_capture_enabled_for(nobody)
        llm.resolve_model()
        known = _known(nobody, group)
        writes = _Writes(job, outcome)
        writes.apply([Candidate(FactType.PROJECT, Action.INSERT, None, "warm-up")], group, known)
        writes.demote(nobody)
        for key in (None, group):  # a group's conditions differ in shape: USER vs a project
            writes.touch_referenced(nobody, key)
            writes.update(nobody, key, "warm-up")
            MemoryItem.stale_machine_row(nobody, key, writes.written)
            MemoryItem.group_active_counts(nobody, key)
        ConsolidationState.cooling_down(nobody, utcnow(), timedelta(0))  # the D15 trigger's
        outcome.finish(OutcomeStatus.SKIPPED, "warm_up")
        outcome.stage()
        db.session.flush()
    finally:
        db.session.rollback()


def _scope_of(project_key: str | None) -> Scope:
    return Scope.USER if project_key is None else Scope.PROJECT


@dataclass
class _Writes:
    """The write phase of one job: Core statements in the caller's transaction."""

    job: ExtractionJob
    outcome: Outcome
    active: int = 0
    written: set[int] = field(default_factory=set)  # rows this run inserted or confirmed

    def apply(self, candidates: list[Candidate], project_key: str | None, known: Known) -> None:
        # Serializes with every other writer that can grow this user's ACTIVE count (manual
        # create/restore, other jobs): the count below stays exact until our commit.
        User.lock(self.job.user_id)
        self.active = MemoryItem.count_active(self.job.user_id)
        for candidate in candidates:
            # Project facts of a session without a valid project key are stored as USER facts.
            key = project_key if candidate.type is FactType.PROJECT else None
            if candidate.action is Action.INSERT:
                self.insert(key, candidate.content)
            elif candidate.existing_id not in known.ids_in(key):
                # MANUAL, DISMISSED, another group's or an unknown id: dropped, never an insert.
                self.outcome.dropped += 1
            elif candidate.action is Action.TOUCH:
                self.touch_referenced(candidate.existing_id, key)
            else:
                self.update(candidate.existing_id, key, candidate.content)

    # ---- statements ------------------------------------------------------------------

    def _same_group_machine_row(self, project_key: str | None) -> list[Any]:
        """Re-checked in the write itself: the row may have changed since the model saw it."""
        return [MemoryItem.machine_made(),
                MemoryItem.scope == _scope_of(project_key),
                MemoryItem.project_key == (project_key or "")]

    def _touch(self, item_id: int, *conditions: Any) -> bool:
        """Move updated_at only (a re-confirmation); False when the row is no longer ACTIVE."""
        result = db.session.execute(
            sa.update(MemoryItem)
            .where(MemoryItem.id == item_id, MemoryItem.user_id == self.job.user_id,
                   MemoryItem.status == Status.ACTIVE, *conditions)
            .values(updated_at=utcnow()).execution_options(synchronize_session=False))
        if result.rowcount != 1:
            return False
        self.outcome.touched += 1
        self.written.add(item_id)
        return True

    def _hit(self, digest: str) -> bool:
        """The exact-hash pre-check: ACTIVE → touch, DISMISSED → skipped, never resurrected."""
        row = db.session.execute(
            sa.select(MemoryItem.id, MemoryItem.status)
            .where(MemoryItem.user_id == self.job.user_id, MemoryItem.dedup_hash == digest)
        ).first()
        if row is None:
            return False
        if row.status != Status.ACTIVE or not self._touch(row.id):
            self.outcome.dropped += 1  # D3
        return True

    def touch_referenced(self, item_id: int, project_key: str | None) -> None:
        if not self._touch(item_id, *self._same_group_machine_row(project_key)):
            self.outcome.dropped += 1

    def update(self, item_id: int, project_key: str | None, content: str | None) -> None:
        assert content is not None
        conditions = [MemoryItem.id == item_id, MemoryItem.user_id == self.job.user_id,
                      MemoryItem.status == Status.ACTIVE,
                      *self._same_group_machine_row(project_key)]
        current = db.session.scalar(sa.select(MemoryItem.dedup_hash).where(*conditions))
        if current is None:
            self.outcome.dropped += 1
            return
        digest = rules.dedup_hash(_scope_of(project_key), project_key, content)
        clash = db.session.scalar(sa.select(MemoryItem.id).where(
            MemoryItem.user_id == self.job.user_id, MemoryItem.dedup_hash == digest))
        if digest == current or clash is not None:
            # Same wording, or another row already says it: re-confirm instead (seed §10.1).
            self.touch_referenced(item_id, project_key)
            return
        try:
            db.session.execute(
                sa.update(MemoryItem).where(*conditions)
                .values(content=content, dedup_hash=digest, updated_at=utcnow())
                .execution_options(synchronize_session=False))
        except IntegrityError:
            # A concurrent manual edit took this wording first: the clash branch after all.
            self.touch_referenced(item_id, project_key)
            return
        self.outcome.updated += 1
        self.outcome.written_groups.add(project_key)
        self.written.add(item_id)

    def insert(self, project_key: str | None, content: str | None) -> None:
        assert content is not None
        scope = _scope_of(project_key)
        digest = rules.dedup_hash(scope, project_key, content)
        if self._hit(digest):
            return
        stale = None
        if self.active >= rules.ACTIVE_PER_USER_MAX:
            # D14: make room by demoting the group's oldest machine-made row, one per insert,
            # at most EXTRACT_MAX_ITEMS per run; no such row → this insert is dropped.
            if self.outcome.demoted < rules.EXTRACT_MAX_ITEMS:
                stale = MemoryItem.stale_machine_row(self.job.user_id, project_key, self.written)
            if stale is None:
                log.info("event=extraction.insert_dropped user=%s session=%s reason=pool_full",
                         self.job.user_id, self.job.session_id)
                self.outcome.dropped += 1
                return
        now = utcnow()
        try:
            result = db.session.execute(sa.insert(MemoryItem).values(
                user_id=self.job.user_id, scope=scope.value, project_key=project_key or "",
                content=content, source=Source.AUTO.value, status=Status.ACTIVE.value,
                dedup_hash=digest, origin_session_id=self.job.session_id, created_at=now,
                updated_at=now))
        except IntegrityError:
            # Same content written concurrently (outside the user lock: a manual edit): the
            # hit branch after all, never a failed job.
            if not self._hit(digest):
                self.outcome.dropped += 1
            return
        self.outcome.inserted += 1
        self.outcome.written_groups.add(project_key)
        self.active += 1
        self.written.add(result.inserted_primary_key[0])
        if stale is not None:
            self.demote(stale)

    def demote(self, item_id: int) -> None:
        """D14 soft demotion: DISMISSED (visible and restorable), updated_at moved."""
        result = db.session.execute(
            sa.update(MemoryItem)
            .where(MemoryItem.id == item_id, MemoryItem.status == Status.ACTIVE)
            .values(status=Status.DISMISSED.value, updated_at=utcnow())
            .execution_options(synchronize_session=False))
        # Zero rows: the user dismissed or deleted it meanwhile; the slot is free either way.
        self.active -= 1
        self.outcome.demoted += result.rowcount
