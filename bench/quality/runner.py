"""Every case through the extraction a job runs, on a database of its own.

One temporary SQLite file per model, built by the migrations as the embedded default is. Each
case is a user of its own (auto-capture on, one session with the case's project key, the
case's memories as rows with past times), so cases cannot see each other. A case then runs the
steps of `app.extraction.runner.run_extraction` — `pipeline.read_inputs` (D9, D11, D10, the
D13 comparison and dismissed sets, the prompt), `pipeline.ask_model` (the `openai` client of
`app.extraction.llm`, the parser) and `pipeline.hand_over` in a unit of work with the job's
outcome row — and its rows are read back and compared with what was seeded. Only the session
lock (one job per session; here one case per session) and the D15 trigger (another model call,
another job) are left out.

Model calls run `concurrency` at a time; the database steps take turns (SQLite has one writer).
The per-call timeout is the service's own (MEMORY_LLM_TIMEOUT_S): a timeout abandons the case
as it abandons a job. Transient failures (connection, 429, 5xx) are tried again `retries`
times, as the queue would. Every answer is kept (`Answer`), so a run can be recorded and
replayed: a replay hands the recorded answers to the same parser and rules.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import sqlalchemy as sa
from flask import Flask
from flask_migrate import upgrade

from app import create_app
from app.auth.models import User
from app.db_types import utcnow
from app.extensions import db
from app.extraction import llm, parser, pipeline
from app.extraction.outcomes import CONFIGURATION_REASONS, JobKindName, Outcome, OutcomeStatus
from app.memory import rules
from app.memory.models import MemoryItem, UserMemoryPreference
from app.sessions.models import PlatformSession
from app.system import service as system
from app.unit_of_work import UnitOfWork
from bench.quality.cases import BOT_PROJECT_KEYS, Case
from bench.quality.scoring import (
    ANSWERED,
    ERROR,
    INVALID,
    SKIPPED,
    TIMEOUT,
    Observation,
    Proposed,
    Stored,
)

# A replay calls no model, but the pipeline still checks that the model's key is set.
REPLAY_KEY_ENV = "QUALITY_REPLAY_API_KEY"
TIMEOUT_REASONS = frozenset({llm.LlmTimeout.reason})
INVALID_REASONS = frozenset({"invalid_output", "too_many_items"})


@dataclass(frozen=True)
class Endpoint:
    """The model under test: any OpenAI-compatible endpoint."""

    model: str
    base_url: str | None = None
    api_key_env: str = llm.DEFAULT_KEY_ENV
    temperature: float | None = None  # None: the provider's default, as a job calls it


@dataclass(frozen=True)
class Answer:
    """What the model answered for one case (or how its call failed), as recorded."""

    text: str | None = None
    error: str | None = None  # the llm error class name
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_s: float | None = None
    prompt_sha256: str | None = None  # of the messages the answer was given for

    def completion(self) -> llm.Completion:
        if self.error is not None:
            raise getattr(llm, self.error, llm.LlmError)(f"recorded: {self.error}")
        total = (None if self.prompt_tokens is None or self.completion_tokens is None
                 else self.prompt_tokens + self.completion_tokens)
        return llm.Completion(self.text or "", self.prompt_tokens, self.completion_tokens, total)


def complete_at(temperature: float) -> pipeline.Complete:
    """`llm.complete` with a sampling temperature (`--temperature`, for `--repeat`): the job
    sends none, so this is the one call the bench makes itself — the same client settings and
    the same mapping of failures to `llm` errors."""
    def complete(model: llm.ChatModel, messages: Sequence[dict[str, str]],
                 timeout_s: float) -> llm.Completion:
        openai = llm.sdk()
        api_key = os.environ.get(llm.api_key_env(model))
        if not api_key:
            raise llm.LlmNotConfigured(f"{llm.api_key_env(model)} is not set")
        client = openai.OpenAI(base_url=model.base_url or os.environ.get(
            llm.DEFAULT_BASE_URL_ENV) or None, api_key=api_key, timeout=timeout_s,
            max_retries=0, http_client=openai.DefaultHttpxClient(verify=llm.tls_context()))
        try:
            response = client.chat.completions.create(model=model.model,
                                                      messages=list(messages),
                                                      temperature=temperature)
        except openai.APITimeoutError as exc:
            raise llm.LlmTimeout(str(exc)) from exc
        except (openai.APIConnectionError, openai.RateLimitError,
                openai.InternalServerError) as exc:
            raise llm.LlmTransientError(type(exc).__name__) from exc
        except openai.APIStatusError as exc:
            raise llm.LlmRejected(f"HTTP {exc.status_code}") from exc
        finally:
            client.close()
        choices = response.choices or []
        text = choices[0].message.content if choices and choices[0].message else None
        if not isinstance(text, str):
            raise llm.LlmInvalidResponse("the completion carries no text")
        usage = response.usage
        return llm.Completion(text, getattr(usage, "prompt_tokens", None),
                              getattr(usage, "completion_tokens", None),
                              getattr(usage, "total_tokens", None))
    return complete


class NotRecorded(llm.LlmError):
    """A replay reached a case whose answer the recording does not hold."""

    reason = "not_recorded"


@dataclass
class Run:
    """One model's run: an observation and (when the model was called) an answer per case."""

    model: str
    observations: list[Observation] = field(default_factory=list)
    answers: dict[str, Answer] = field(default_factory=dict)
    stale: int = 0  # replayed answers given for a prompt other than today's


def prompt_sha256(messages: Sequence[dict[str, str]]) -> str:
    return hashlib.sha256(json.dumps(list(messages), ensure_ascii=False,
                                     sort_keys=True).encode()).hexdigest()


def build_app(database: Path, timeout_s: float) -> Flask:
    """The service on an empty SQLite file, schema by the migrations; no Redis (embedded)."""
    app = create_app({"SQLALCHEMY_DATABASE_URI": f"sqlite:///{database}", "REDIS_URL": None,
                      "MEMORY_LLM_TIMEOUT_S": timeout_s,
                      "MEMORY_BOT_PROJECT_KEYS": BOT_PROJECT_KEYS,
                      "MEMORY_RETRY_DELAYS_S": ()})
    # The migrations' logging config announces every revision at INFO; a bench run needs none
    # of it (and it would not be quiet for a second model).
    previous = logging.root.manager.disable
    logging.disable(logging.INFO)
    try:
        with app.app_context():
            upgrade()
    finally:
        logging.disable(previous)
    return app


# The seeded rows of each case: id → (ref, source, status, words, time).
Seeded = dict[int, tuple[str, str, str, str, datetime]]


def seed(cases: Sequence[Case]) -> dict[str, Seeded]:
    """Users, switches, sessions and memories of every case. User and session ids are the
    case's position + 1. Call in an app context."""
    base = utcnow() - timedelta(days=30)
    rows: list[tuple[str, str, MemoryItem]] = []
    for user_id, case in enumerate(cases, 1):
        db.session.add(User(id=user_id, username=f"quality-{user_id}"))
        db.session.add(UserMemoryPreference(user_id=user_id, auto_capture_enabled=True))
        db.session.add(PlatformSession(id=user_id, user_id=user_id,
                                       project_key=case.project_key, session_type="NORMAL",
                                       channel="WEB"))
        for position, memory in enumerate(case.memories):
            at = base + timedelta(hours=position)  # older first, as the user built them up
            rows.append((case.id, memory.ref, MemoryItem(
                user_id=user_id, scope=memory.scope, project_key=memory.project_key,
                content=memory.content, source=memory.source, status=memory.status,
                dedup_hash=rules.dedup_hash(memory.scope, memory.project_key, memory.content),
                created_at=at, updated_at=at)))
    db.session.add_all([row for _, _, row in rows])
    db.session.commit()
    seeded: dict[str, Seeded] = {case.id: {} for case in cases}
    for case_id, ref, row in rows:
        seeded[case_id][row.id] = (ref, row.source, row.status, row.content, row.updated_at)
    db.session.remove()
    return seeded


# A memory-backed directory when the machine has one: the runs commit once per case, and a
# seeded set is ~10 000 rows (the realistic comparison sets).
FAST_TMP = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
_templates: dict[tuple, tuple[Path, dict[str, Seeded]]] = {}
_templates_dir: tempfile.TemporaryDirectory | None = None


def template(cases: Sequence[Case]) -> tuple[Path, dict[str, Seeded]]:
    """The migrated and seeded database of `cases`, built once per process and copied for each
    run (seeding the comparison sets is most of a run's time); its seeded rows."""
    global _templates_dir
    key = tuple(cases)
    if key not in _templates:
        if _templates_dir is None:
            _templates_dir = tempfile.TemporaryDirectory(prefix="quality-templates-",
                                                         dir=FAST_TMP)
        path = Path(_templates_dir.name) / f"template-{len(_templates)}.sqlite3"
        app = build_app(path, 30.0)
        try:
            with app.app_context():
                seeded = seed(cases)
        finally:
            _dispose(app)
        _templates[key] = (path, seeded)
    return _templates[key]


def _dispose(app: Flask) -> None:
    with app.app_context():
        db.session.remove()
        db.engine.dispose()
    app.extensions["hot_engines"].dispose()


def observe(user_id: int, seeded: Seeded) -> dict[str, tuple]:
    """The case's rows now, against what was seeded: inserted, touched, updated, changed."""
    now = db.session.execute(sa.select(
        MemoryItem.id, MemoryItem.scope, MemoryItem.project_key, MemoryItem.content,
        MemoryItem.status, MemoryItem.updated_at).where(MemoryItem.user_id == user_id)
        .order_by(MemoryItem.id)).all()
    current = {row.id: row for row in now}
    inserted = tuple(Stored(r.scope, r.project_key, r.content) for r in now if r.id not in seeded)
    touched, updated, changed = [], [], []
    for item_id, (ref, _source, status, content, at) in seeded.items():
        row = current.get(item_id)
        if row is None or (row.status, row.content, row.updated_at) != (status, content, at):
            changed.append(ref)
        if row is not None and row.status == status:
            if row.content != content:
                updated.append((ref, row.content))
            elif row.updated_at != at:
                touched.append(ref)
    return {"inserted": inserted, "touched": tuple(touched), "updated": tuple(updated),
            "changed": tuple(changed)}


class _Case:
    """One case's job: the pipeline's steps, with the database steps under `db_lock`."""

    def __init__(self, app: Flask, case: Case, user_id: int, seeded: Seeded,
                 db_lock: threading.Lock, recorded: dict[str, Answer] | None,
                 retries: int, retry_delay_s: float,
                 complete: pipeline.Complete = llm.complete) -> None:
        self.app, self.case, self.user_id, self.seeded = app, case, user_id, seeded
        self.db_lock, self.recorded, self.complete = db_lock, recorded, complete
        self.retries, self.retry_delay_s = retries, retry_delay_s
        self.answer: Answer | None = None
        self.stale = False
        self.job = pipeline.ExtractionJob(
            user_id=user_id, session_id=user_id, event_id=f"quality-{case.id}",
            project_key=case.project_key, user_message=case.user,
            assistant_message=case.assistant)
        self.outcome = Outcome(kind=JobKindName.EXTRACTION, job_id=f"quality-{case.id}",
                               user_id=user_id, attempts=1, event_id=self.job.event_id,
                               session_id=user_id)

    def _call(self, model: llm.ChatModel, messages: Sequence[dict[str, str]],
              timeout_s: float) -> llm.Completion:
        """`pipeline.Complete`: the real call (its answer kept), or the recorded answer."""
        sha = prompt_sha256(messages)
        if self.recorded is not None:
            answer = self.recorded.get(self.case.id)
            if answer is None:
                raise NotRecorded(self.case.id)
            self.answer, self.stale = answer, answer.prompt_sha256 not in (None, sha)
            return answer.completion()
        started = time.perf_counter()
        try:
            completion = self.complete(model, messages, timeout_s)
        except llm.LlmError as exc:
            self.answer = Answer(error=type(exc).__name__,
                                 latency_s=time.perf_counter() - started, prompt_sha256=sha)
            raise
        self.answer = Answer(completion.text, None, completion.prompt_tokens,
                             completion.completion_tokens, time.perf_counter() - started, sha)
        return completion

    def _ask(self, inputs: pipeline.Inputs) -> tuple[parser.Parsed | None, str, str]:
        """(parsed answer or None, status, reason)."""
        attempts = 1 if self.recorded is not None else 1 + self.retries
        for attempt in range(1, attempts + 1):
            try:
                with self.app.app_context():
                    parsed = pipeline.ask_model(inputs, self.outcome, complete=self._call)
            except llm.LlmTransientError as exc:
                if attempt == attempts:
                    return None, ERROR, exc.reason
                time.sleep(self.retry_delay_s * attempt)
                continue
            except llm.LlmError as exc:
                return None, ERROR, exc.reason
            if parsed is not None:
                return parsed, ANSWERED, ""
            reason = self.outcome.reason
            return None, TIMEOUT if reason in TIMEOUT_REASONS else INVALID, reason
        raise AssertionError("unreachable")

    def run(self) -> Observation:
        with self.db_lock, self.app.app_context():
            inputs = pipeline.read_inputs(self.job, self.outcome)
            db.session.remove()
        parsed: parser.Parsed | None = None
        status, reason = SKIPPED, self.outcome.reason
        if inputs is None and reason in CONFIGURATION_REASONS:
            status = ERROR
        if inputs is not None:
            parsed, status, reason = self._ask(inputs)
            if status == ERROR:
                self.outcome.finish(OutcomeStatus.FAILED, reason)  # as the runner's `_fail`
        with self.db_lock, self.app.app_context():
            with UnitOfWork() as uow:
                if parsed is not None:
                    pipeline.hand_over(uow, self.job, inputs, parsed, self.outcome)
                    reason = self.outcome.reason  # applied, nothing_to_remember
                self.outcome.stage(uow)
                uow.commit()
            changes = observe(self.user_id, self.seeded)
            active = db.session.scalar(sa.select(sa.func.count()).select_from(MemoryItem).where(
                MemoryItem.user_id == self.user_id, MemoryItem.status == "ACTIVE"))
            db.session.remove()
        answer = self.answer or Answer()
        proposed = () if parsed is None else tuple(
            Proposed(str(c.action), str(c.type), c.content, c.existing_id)
            for c in parsed.candidates)
        dropped = 0 if parsed is None else parsed.dropped
        return Observation(case_id=self.case.id, status=status, reason=reason,
                           called=inputs is not None, proposed=proposed, dropped_items=dropped,
                           # Candidates holding a credential are counted apart by the
                           # service (secrets_dropped); they are refusals here too.
                           refused=self.outcome.dropped - dropped + self.outcome.secrets_dropped,
                           active_after=active,
                           prompt_tokens=answer.prompt_tokens,
                           completion_tokens=answer.completion_tokens,
                           latency_s=answer.latency_s, **changes)


def run_model(cases: Sequence[Case], endpoint: Endpoint, *, name: str | None = None,
              recorded: dict[str, Answer] | None = None, concurrency: int = 4,
              timeout_s: float = 30.0, retries: int = 2, retry_delay_s: float = 1.0,
              progress: Callable[[int, int], None] | None = None) -> Run:
    """Every case through the pipeline against `endpoint` — or, with `recorded`, against the
    recorded answers — on a fresh temporary database."""
    if recorded is not None:
        os.environ.setdefault(REPLAY_KEY_ENV, "replay")
        endpoint = Endpoint(endpoint.model, "http://replay.invalid/v1", REPLAY_KEY_ENV)
    run = Run(name or endpoint.model)
    source, seeded = template(cases)
    with tempfile.TemporaryDirectory(prefix="quality-", dir=FAST_TMP) as tmp:
        database = Path(tmp) / "quality.sqlite3"
        shutil.copyfile(source, database)
        app = build_app(database, timeout_s)
        try:
            with app.app_context():
                # The model under test as the default (D10).
                system.add_model("under-test", endpoint.model, base_url=endpoint.base_url,
                                 api_key_env=endpoint.api_key_env, default=True)
                db.session.remove()
            db_lock = threading.Lock()
            complete = (llm.complete if endpoint.temperature is None
                        else complete_at(endpoint.temperature))
            jobs = [_Case(app, case, user_id, seeded[case.id], db_lock, recorded, retries,
                          retry_delay_s, complete) for user_id, case in enumerate(cases, 1)]
            done = 0
            with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
                for job, observation in zip(jobs, pool.map(_Case.run, jobs), strict=True):
                    run.observations.append(observation)
                    if job.answer is not None:
                        run.answers[job.case.id] = job.answer
                    run.stale += job.stale
                    done += 1
                    if progress is not None:
                        progress(done, len(jobs))
        finally:
            _dispose(app)
    return run


def print_progress(done: int, total: int) -> None:
    """`done/total` on one line of a terminal's stderr (elsewhere: every 25 cases)."""
    if sys.stderr.isatty():
        print(f"\r{done}/{total}", end="\n" if done == total else "", file=sys.stderr,
              flush=True)
    elif done % 25 == 0 or done == total:
        print(f"{done}/{total}", file=sys.stderr, flush=True)
