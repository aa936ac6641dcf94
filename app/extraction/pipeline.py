"""The extraction rules (seed §5.6, §10.1, §10.2) for one finished task: read the inputs, ask the
model, hand what it answered to the domain.

1. `read_inputs`: the toggle re-checked (D9), the two texts (D8), the short-circuit (D11, no LLM
   call), the model (D10) and whether it can run, the comparison and negative sets (D13), the
   D15 cooldown — all read in one round trip of the read engine, outside any transaction; when
   they cannot be read the attempt is a transient failure, never a blind call.
2. `ask_model`: one chat completion and its parsing — the runner calls it with no transaction
   open; a timeout or an invalid answer abandons the run (seed §5.6 step 4).
3. `hand_over`: the checked candidates, placed in their groups (a project fact of a session
   without a valid project key becomes a USER fact), go to `UserMemories.learn`, which applies
   D3, D13 and D14 under the user's lock.

The runner owns the transactions around these steps; nothing here commits.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from flask import current_app
from sqlalchemy.exc import SQLAlchemyError

from app.database.batches import batch
from app.database.conflicts import retry_conflicts, server_said
from app.database.engines import hot_engines
from app.extraction import llm, parser, prompt, trigger
from app.extraction.outcomes import Outcome, OutcomeStatus, runnable_model
from app.extraction.parser import Candidate, FactType
from app.memory import repository, rules
from app.memory.events import Actor
from app.memory.memories import Fact, UserMemories
from app.memory.repository import Known
from app.memory.rules import USER_GROUP, Group
from app.memory.service import bot_project_keys
from app.unit_of_work import UnitOfWork

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
class Inputs:
    """What the model is shown, and where its facts may go."""

    model: llm.ChatModel
    project_group: Group | None  # None: the session has no valid project key
    comparison: list[Known]  # with ids: what the model may touch or update (D13)
    dismissed: list[str]  # the negative set, without ids
    messages: list[dict[str, str]]
    cooling_down: bool = False  # D15's cooldown: no consolidation is asked after this job

    def references(self) -> dict[Group, dict[int, int]]:
        """Per group, the ids a candidate of that group may name, each with the version the
        model was shown."""
        ids: dict[Group, dict[int, int]] = {}
        for memory in self.comparison:
            ids.setdefault(memory.group, {})[memory.id] = memory.version
        return ids


def _clip(text: str) -> str:
    """D8: each side of the conversation is cut to EXTRACT_INPUT_MAX code points."""
    return text.strip()[:rules.EXTRACT_INPUT_MAX]


@dataclass(frozen=True)
class JobReads:
    """What the job decides on, read in one batch (`_read`)."""

    capturing: bool  # D9
    model: llm.ChatModel | None  # D10
    cooling_down: bool  # D15
    known: repository.KnownSets  # D13


class InputsUnreadable(Exception):
    """What the job decides on could not be read. The model is never asked without the user's
    comparison and dismissed sets (SPEC §11: a job never works blind): the attempt is a
    transient failure, retried on the usual schedule."""

    reason = "database_unavailable"


@retry_conflicts
def _read_once(job: ExtractionJob, groups: list[Group]) -> JobReads:
    with hot_engines().reads.connect() as conn:
        return JobReads(*batch(conn, repository.auto_capture(job.user_id),
                               llm.EXTRACTION_MODEL, trigger.cooldown(job.user_id),
                               repository.known_sets(job.user_id, groups)))


def _read(job: ExtractionJob, groups: list[Group]) -> JobReads:
    """Everything the job decides on, in one round trip of the read engine: the D9 switch, the
    D10 model, the D15 cooldown and the D13 sets of `groups` — read again on a fresh connection
    when the pooled one turned out dead (`retry_conflicts`)."""
    try:
        return _read_once(job, groups)
    except SQLAlchemyError as exc:
        log.warning("event=extraction.inputs_unreadable user=%s error=%s detail=%r", job.user_id,
                    type(exc).__name__, server_said(exc))
        raise InputsUnreadable(str(exc)) from exc


def read_inputs(job: ExtractionJob, outcome: Outcome) -> Inputs | None:
    """The inputs of the model call, or None when the job ends here (`outcome` says why)."""
    project_key = rules.valid_project_key(job.project_key, bot_project_keys())
    project_group = None if project_key is None else Group(project_key)
    groups = [USER_GROUP] if project_group is None else [USER_GROUP, project_group]
    reads = _read(job, groups)
    if not reads.capturing:
        outcome.finish(OutcomeStatus.SKIPPED, "auto_capture_disabled")  # re-checked (D9)
        return None
    user_text, assistant_text = job.user_message or "", job.assistant_message or ""
    if not rules.normalize(user_text) or not rules.normalize(assistant_text):
        outcome.finish(OutcomeStatus.SKIPPED, "missing_message")
        return None
    if rules.length(rules.normalize(user_text)) < rules.EXTRACT_MIN_USER_MESSAGE:
        outcome.finish(OutcomeStatus.SKIPPED, "user_message_too_short")  # D11: no LLM call
        return None
    model = runnable_model(outcome, reads.model)
    if model is None:
        return None
    comparison, dismissed = reads.known
    messages = prompt.build_messages(project_key=project_key, comparison=comparison,
                                     dismissed=dismissed, user_message=_clip(user_text),
                                     assistant_message=_clip(assistant_text))
    return Inputs(model, project_group, comparison, dismissed, messages, reads.cooling_down)


# What `ask_model` calls for the completion: `llm.complete` in every job. The quality bench
# (`bench.quality`) passes one that records or replays the model's answers, so a saved run is
# re-scored through this same parsing and these same outcomes.
Complete = Callable[[llm.ChatModel, Sequence[dict[str, str]], float], llm.Completion]


def ask_model(inputs: Inputs, outcome: Outcome,
              complete: Complete | None = None) -> parser.Parsed | None:
    """One chat completion, parsed; None when the run is abandoned (`outcome` says why)."""
    outcome.model, outcome.prompt_chars = inputs.model.model, prompt.prompt_chars(inputs.messages)
    try:
        completion = (complete or llm.complete)(inputs.model, inputs.messages,
                                                current_app.config["MEMORY_LLM_TIMEOUT_S"])
        outcome.count_tokens(completion)
        return parser.parse(completion.text)
    except (llm.LlmTimeout, llm.LlmInvalidResponse, parser.InvalidOutput) as exc:
        outcome.finish(OutcomeStatus.ABANDONED, exc.reason)  # seed §5.6 step 4: give up quietly
        return None


def _fact(candidate: Candidate, project_group: Group | None) -> Fact:
    # Project facts of a session without a valid project key are stored as USER facts.
    group = project_group if candidate.type is FactType.PROJECT and project_group else USER_GROUP
    return Fact(candidate.action, group, candidate.content, candidate.existing_id)


def hand_over(uow: UnitOfWork, job: ExtractionJob, inputs: Inputs, parsed: parser.Parsed,
              outcome: Outcome) -> None:
    """The model's candidates to the domain; the outcome's counts from what it changed."""
    outcome.dropped = parsed.dropped
    if parsed.candidates:
        memories = UserMemories(uow, job.user_id, Actor.EXTRACTION, job.session_id)
        # The comparison set alone fills the pool: a first insert will have to make room.
        learned = memories.learn([_fact(c, inputs.project_group) for c in parsed.candidates],
                                 inputs.references(),
                                 pool_full=len(inputs.comparison) >= rules.ACTIVE_PER_USER_MAX)
        outcome.add(learned)
    if not parsed.candidates and not parsed.dropped:
        reason = "nothing_to_remember"
    else:
        reason = "applied"
    outcome.finish(OutcomeStatus.SUCCEEDED, reason)
