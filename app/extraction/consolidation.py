"""The D15 consolidation of one memory group (seed §10.3): merge, keep or drop machine rows.

1. `read_inputs`: the toggle (D9: a user who switched automatic memory off gets no machine
   rewrites either), the group's machine-made ACTIVE rows (AUTO, CONSOLIDATED) with ids — MANUAL
   and DISMISSED rows are never read — and the model (D10, the extraction model).
2. `ask_model`: one chat completion, with no transaction open; the answer is validated as a
   whole (`parser.parse_plan`) or the group is abandoned.
3. `hand_over`: `UserMemories.consolidate` applies the plan under the user's lock, in the
   runner's transaction, so the group changes completely or not at all: every named row must
   still be what the model saw, a merge whose words the user dismissed is refused (D3), merged
   and dropped rows are deleted, and each merge becomes one CONSOLIDATED row.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from flask import current_app

from app.extraction import llm, parser, prompt
from app.extraction.outcomes import Outcome, OutcomeStatus, runnable_model
from app.memory import repository
from app.memory.events import Actor
from app.memory.memories import Plan, UserMemories
from app.memory.rules import MERGE_MIN_SOURCES, Group
from app.unit_of_work import UnitOfWork


@dataclass(frozen=True)
class ConsolidationJob:
    """One group of one user; the payload is the user id and the group's key, nothing else."""

    user_id: int
    group: Group

    @classmethod
    def from_payload(cls, payload: dict[str, Any]) -> ConsolidationJob:
        return cls(user_id=payload["user_id"],
                   group=Group.of(payload["scope"], payload.get("project_key")))

    def payload(self) -> dict[str, Any]:
        return {"user_id": self.user_id, "scope": self.group.scope.value,
                "project_key": self.group.project_key}

    def job_id(self, started: datetime) -> str:
        # Project keys are free text; RQ ids allow letters, digits, '-' and '_' only.
        key = self.group.project_key
        name = "user" if key is None else "p" + hashlib.sha1(key.encode("utf-8")).hexdigest()[:16]
        return f"consolidate-{self.user_id}-{int(started.timestamp() * 1000)}-{name}"


@dataclass(frozen=True)
class Inputs:
    model: llm.ChatModel
    seen: dict[int, int]  # id → version of every row the model is shown
    messages: list[dict[str, str]]


def read_inputs(job: ConsolidationJob, outcome: Outcome) -> Inputs | None:
    """The inputs of the model call, or None when the job ends here (`outcome` says why)."""
    if not repository.auto_capture_enabled(job.user_id):
        outcome.finish(OutcomeStatus.SKIPPED, "auto_capture_disabled")
        return None
    rows = repository.machine_rows(job.user_id, job.group)
    outcome.rows_in = outcome.rows_out = len(rows)
    outcome.merges = outcome.drops = 0
    if len(rows) < MERGE_MIN_SOURCES:
        outcome.finish(OutcomeStatus.SKIPPED, "too_few_rows")  # nothing to merge: no LLM call
        return None
    model = runnable_model(outcome, llm.resolve_model())
    if model is None:
        return None
    # The model is told how far the machine rows must shrink for the whole group (MANUAL rows
    # included, since they are injected too) to reach its target.
    _, other_rows = repository.group_counts(job.user_id, job.group)
    budget = max(job.group.consolidation_target - other_rows, 1)
    messages = prompt.build_consolidation_messages(
        group=job.group, budget=budget, rows=[(r.id, r.content) for r in rows])
    return Inputs(model, {row.id: row.version for row in rows}, messages)


def ask_model(inputs: Inputs, outcome: Outcome) -> Plan | None:
    """One chat completion; the validated plan, or None when the group is left as it is."""
    outcome.model = inputs.model.model
    outcome.prompt_chars = prompt.prompt_chars(inputs.messages)
    try:
        completion = llm.complete(inputs.model, inputs.messages,
                                  current_app.config["MEMORY_LLM_TIMEOUT_S"])
        outcome.count_tokens(completion)
        plan = parser.parse_plan(completion.text, inputs.seen.keys())
    except (llm.LlmTimeout, llm.LlmInvalidResponse, parser.InvalidOutput) as exc:
        outcome.finish(OutcomeStatus.ABANDONED, exc.reason)
        return None
    if not plan.changes_anything:
        outcome.finish(OutcomeStatus.SUCCEEDED, "nothing_to_consolidate")
        return None
    return plan


def hand_over(uow: UnitOfWork, job: ConsolidationJob, inputs: Inputs, plan: Plan,
              outcome: Outcome) -> None:
    """The plan to the domain (which raises GroupChanged when the group moved meanwhile); the
    outcome's counts from what it changed."""
    memories = UserMemories(uow, job.user_id, Actor.CONSOLIDATION)
    done = memories.consolidate(job.group, plan, inputs.seen)
    outcome.inserted, outcome.touched, outcome.dropped = done.inserted, done.touched, done.refused
    outcome.secrets_dropped = done.secrets_refused
    outcome.merges, outcome.drops, outcome.rows_out = done.merges, done.drops, done.rows_out
    changed = bool(done.merges or done.drops)
    outcome.finish(OutcomeStatus.SUCCEEDED,
                   "consolidated" if changed else "nothing_to_consolidate")

