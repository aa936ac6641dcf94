"""Concurrency: 8 real worker processes share 400 extractions of one user who starts at 195
ACTIVE memories, the scripted model inserting on every run.

The 200 ACTIVE cap holds at every moment another connection can see (sampled throughout the
run, not only at the end), no (user, dedup_hash) is stored twice, no job fails, and every job
leaves exactly one outcome row. Each job has its own session, so the per-session lock does not
serialize them: only the per-user lock of the write phase does.
"""

from __future__ import annotations

import hashlib
import threading
import time
from types import TracebackType

import redis
import sqlalchemy as sa
from flask.testing import FlaskClient
from rq import Queue

from tests.completions import capture_on, event, queue_name
from tests.conftest import TEST_DATABASE_URL, TEST_REDIS_URL, Memories
from tests.llm_server import ScriptedLlm
from tests.reliability.conftest import deliver
from tests.workers import worker_processes

WORKERS = 8
JOBS = WORKERS * 50
USER_ID = 880
START_ACTIVE = 195
CAP = 200
# Facts several jobs propose at once: concurrent inserts of the same hash.
SHARED_FACTS = 7
# Replies beyond one per extraction, for any other job the runs may trigger (a consolidation
# asks the model too); unused ones are simply left over.
SPARE_REPLIES = 20


class ActiveSampler:
    """Polls, from its own connection, the user's ACTIVE count and how many jobs have ended."""

    QUERY = sa.text(
        "SELECT (SELECT COUNT(*) FROM memory_item WHERE user_id = :user AND status = 'ACTIVE'),"
        " (SELECT COUNT(*) FROM memory_job_outcome WHERE kind = 'extraction')")

    def __init__(self) -> None:
        self.samples: list[tuple[int, int]] = []
        self._stop = threading.Event()
        self._engine = sa.create_engine(TEST_DATABASE_URL, isolation_level="READ COMMITTED")
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> ActiveSampler:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self._engine.dispose()

    def _run(self) -> None:
        with self._engine.connect() as connection:
            while not self._stop.is_set():
                active, ended = connection.execute(self.QUERY, {"user": USER_ID}).one()
                connection.rollback()
                self.samples.append((active, ended))
                time.sleep(0.01)


def _script(llm: ScriptedLlm) -> None:
    for i in range(JOBS + SPARE_REPLIES):
        llm.reply_items([{"type": "user", "content": f"第 {i} 次任务学到的新事实"},
                         {"type": "user", "content": f"很多任务都会提到的事实 {i % SHARED_FACTS}"}])


def _enqueue(client: FlaskClient) -> set[str]:
    """One signed completion per job, each of its own session; returns the RQ job ids."""
    job_ids = set()
    for i in range(JOBS):
        event_id = f"evt-concurrency-{i}"
        body = event(eventId=event_id, userId=USER_ID, sessionId=50_000 + i,
                     lastUserMessage=f"第 {i} 个任务:以后的报告都用中文写,仓库统一用 pnpm 管理依赖")
        response = deliver(client, body)
        assert response.get_json()["data"]["enqueued"] is True, response.text
        job_ids.add("extract-" + hashlib.sha1(event_id.encode()).hexdigest())
    return job_ids


def test_eight_workers_never_take_a_user_past_200_active(app, client, llm, memories: Memories,
                                                       tmp_path):
    capture_on(app, USER_ID)
    memories.bulk(USER_ID, [f"早先自动记下的事实 {i}" for i in range(START_ACTIVE)],
                  source="AUTO")
    _script(llm)
    job_ids = _enqueue(client)

    started = time.monotonic()
    # --no-fork: the eight processes race exactly as forking ones do (the lock is the database's),
    # without a fork per job, which on two cores made this test take minutes.
    with (ActiveSampler() as sampler,
          worker_processes(WORKERS, tmp_path, burst=True, fork=False) as workers):
        for worker in workers:
            assert worker.wait(timeout=100) == 0, "a worker failed or did not finish in time"
    print(f"\n{JOBS} jobs on {WORKERS} workers in {time.monotonic() - started:.1f} s, "
          f"{len(sampler.samples)} samples of ACTIVE")

    during = [active for active, ended in sampler.samples if 0 < ended < JOBS]
    assert len(during) >= 20, "too few samples were taken while the jobs ran"
    assert max(active for active, _ in sampler.samples) <= CAP
    assert max(during) == CAP, "the run never reached the cap, so it proved nothing"

    engine = sa.create_engine(TEST_DATABASE_URL)
    try:
        with engine.connect() as connection:
            active = connection.execute(sa.text(
                "SELECT COUNT(*) FROM memory_item WHERE user_id = :u AND status = 'ACTIVE'"),
                {"u": USER_ID}).scalar()
            duplicates = connection.execute(sa.text(
                "SELECT dedup_hash, COUNT(*) FROM memory_item WHERE user_id = :u "
                "GROUP BY dedup_hash HAVING COUNT(*) > 1"), {"u": USER_ID}).all()
            outcomes = connection.execute(sa.text(
                "SELECT job_id, status, reason FROM memory_job_outcome "
                "WHERE kind = 'extraction'")).all()
    finally:
        engine.dispose()
    assert active == CAP
    assert duplicates == []
    assert sorted(o.job_id for o in outcomes) == sorted(job_ids), "not one outcome per job"
    failed = [o for o in outcomes if o.status != "succeeded"]
    assert failed == [], failed[:5]
    connection = redis.Redis.from_url(TEST_REDIS_URL)
    try:
        assert Queue(queue_name(app), connection=connection).failed_job_registry.count == 0
    finally:
        connection.close()
