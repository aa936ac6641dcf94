"""Real worker processes: same-session serialization, a killed job, the worker command."""

from __future__ import annotations

import os
import signal
import socket
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from app.extensions import db
from app.memory.models import MemoryItem
from tests.completions import (
    USER_ID,
    capture_on,
    event,
    only_outcome,
    outcomes,
    rq_job,
    rq_queue,
    wait_for_blocked,
)
from tests.conftest import TEST_DATABASE_URL, assert_ok
from tests.workers import registered_workers, wait_until, work_horse_of, worker_processes


def _overlap(a, b) -> bool:
    return a.started < b.ended and b.started < a.ended


def test_jobs_of_one_session_never_overlap(app, metrics, llm, webhook, tmp_path):
    """Three workers, three jobs at once: two of session 1 (serialized by the Redis lock, on
    two workers), one of session 2 (runs alongside, so the workers really are concurrent)."""
    capture_on(app)
    for _ in range(3):
        llm.reply_items([], delay=1.5)
    bodies = [event(sessionId=1, lastUserMessage="会话一的第一个任务:以后所有报告都用中文来写"),
              event(sessionId=1, lastUserMessage="会话一的第二个任务:仓库统一用 pnpm 管理"),
              event(sessionId=2, lastUserMessage="会话二的任务:测试统一用 Vitest 来跑")]
    with worker_processes(3, tmp_path):
        wait_until(lambda: registered_workers() == 3, 60, "three registered workers")
        for body in bodies:
            assert assert_ok(webhook(body), 202)["enqueued"] is True
        wait_until(lambda: len(outcomes(app)) == 3, 60, "three outcomes")

    assert [o["status"] for o in outcomes(app)] == ["succeeded"] * 3
    by_task = {marker: next(r for r in llm.requests if marker in r.prompt)
               for marker in ("会话一的第一个任务", "会话一的第二个任务", "会话二的任务")}
    first, second, other = by_task.values()
    assert not _overlap(first, second), "two jobs of one session ran at the same time"
    assert _overlap(other, first) or _overlap(other, second)
    workers = {rq_job(app, o["jobId"]).worker_name for o in outcomes(app)}
    assert len(workers) == 3
    # Outcomes written by other processes show in this process's metrics.
    assert metrics.added("memory_jobs_total", kind="extraction", status="succeeded",
                         reason="nothing_to_remember") == 3


NEW_FACT = "被杀之前插入的新事实"


def _kill_mid_transaction(app, llm, webhook, memories, tmp_path, kill,
                          fork: bool = True) -> tuple[int, dict]:
    """Run one job on a real worker until it has inserted a row and waits for a row lock we
    hold, then `kill(worker)`. Returns the row the job wanted to touch, and that row before."""
    capture_on(app)
    confirmed = memories.add(USER_ID, "要被再次确认的事实", source="AUTO")
    before = memories.get(confirmed)
    llm.reply_items([{"type": "user", "content": NEW_FACT},
                     {"type": "user", "action": "touch", "existingId": confirmed}])
    engine = sa.create_engine(TEST_DATABASE_URL, isolation_level="READ COMMITTED")
    holder = engine.connect()
    transaction = holder.begin()
    holder.execute(sa.select(MemoryItem.id).where(MemoryItem.id == confirmed).with_for_update())
    try:
        with worker_processes(1, tmp_path, burst=True, fork=fork) as (worker,):
            assert assert_ok(webhook(event()), 202)["enqueued"] is True
            assert wait_for_blocked(engine), "the job never reached the row we hold"
            # A dirty read sees the job's uncommitted insert: it really is half-way.
            with engine.connect().execution_options(
                    isolation_level="READ UNCOMMITTED") as dirty:
                half_way = dirty.execute(sa.select(sa.func.count()).select_from(MemoryItem)
                                         .where(MemoryItem.content == NEW_FACT)).scalar()
            assert half_way == 1, "the job had not written anything yet"
            kill(worker)
    finally:
        transaction.rollback()
        holder.close()
        engine.dispose()
    return confirmed, before


def test_a_job_killed_mid_way_leaves_no_partial_writes(app, llm, webhook, memories, tmp_path):
    """Its work horse is killed; the worker survives and records the outcome."""
    def kill_the_horse(worker) -> None:
        horse = work_horse_of(worker.pid)
        assert horse is not None
        os.kill(horse, signal.SIGKILL)
        wait_until(lambda: outcomes(app), 30, "the killed job's outcome")
        worker.wait(timeout=30)

    confirmed, before = _kill_mid_transaction(app, llm, webhook, memories, tmp_path,
                                              kill_the_horse)
    assert memories.count(USER_ID, content=NEW_FACT) == 0
    assert memories.get(confirmed) == before
    outcome = only_outcome(app)
    assert (outcome["status"], outcome["reason"], outcome["inserted"]) == \
        ("failed", "worker_killed", 0)


def _kill_worker_and_horse(worker) -> None:
    horse = work_horse_of(worker.pid)
    assert horse is not None
    os.kill(worker.pid, signal.SIGKILL)
    os.kill(horse, signal.SIGKILL)
    worker.wait(timeout=30)


def _kill_unforked_worker(worker) -> None:
    assert work_horse_of(worker.pid) is None, "a --no-fork worker forked"
    os.kill(worker.pid, signal.SIGKILL)
    worker.wait(timeout=30)


@pytest.mark.parametrize(("fork", "kill"), [(True, _kill_worker_and_horse),
                                            (False, _kill_unforked_worker)],
                         ids=["worker and horse", "no-fork worker"])
def test_a_job_whose_worker_died_gets_its_outcome_from_maintenance(
        fork, kill, app, llm, webhook, memories, tmp_path):
    """The worker dies mid-job (with its horse, or under `--no-fork` running the job itself):
    nothing persists, and the RQ registry maintenance that finds the abandoned job (run here as
    if its heartbeat had long expired) records the outcome."""
    confirmed, before = _kill_mid_transaction(app, llm, webhook, memories, tmp_path, kill,
                                              fork=fork)
    assert outcomes(app) == []
    queue = rq_queue(app)
    with app.app_context():
        queue.started_job_registry.cleanup(timestamp=time.time() + 24 * 3600)
    assert memories.count(USER_ID, content=NEW_FACT) == 0
    assert memories.get(confirmed) == before
    outcome = only_outcome(app)
    assert (outcome["status"], outcome["reason"]) == ("failed", "worker_lost")


@pytest.mark.parametrize("fork", [True, False], ids=["fork", "no-fork"])
def test_the_worker_command_runs_queued_jobs_and_exits_in_burst_mode(
        fork, app, llm, webhook, memories, tmp_path):
    capture_on(app)
    llm.reply_items([{"type": "user", "content": "输出报告用中文"}])
    assert_ok(webhook(event()), 202)
    with worker_processes(1, tmp_path, burst=True, fork=fork) as (worker,):
        assert worker.wait(timeout=60) == 0
    assert only_outcome(app)["status"] == "succeeded"
    assert memories.count(USER_ID, content="输出报告用中文", source="AUTO") == 1


def test_the_work_horses_of_a_worker_write_their_metrics_to_one_file(
        app, metrics, llm, webhook, tmp_path):
    """Forked horses share their worker's horse file: the metrics directory grows by worker,
    not by job, so a scrape costs the same after a million jobs."""
    capture_on(app)
    directory = Path(os.environ["PROMETHEUS_MULTIPROC_DIR"])
    before = {path.name for path in directory.iterdir()}
    for _ in range(4):
        llm.reply_items([])
        assert assert_ok(webhook(event()), 202)["enqueued"] is True
    with worker_processes(1, tmp_path, burst=True) as (worker,):
        assert worker.wait(timeout=60) == 0
    assert metrics.added("memory_jobs_total", kind="extraction", status="succeeded",
                         reason="nothing_to_remember") == 4
    new = {path.name for path in directory.iterdir()} - before
    assert {name.split("_", 1)[1] for name in new} <= \
        {f"{worker.pid}.db", f"horses-of-{worker.pid}.db"}
    assert any("horses-of" in name for name in new)


def test_the_worker_command_needs_redis(make_app):
    app = make_app(REDIS_URL=None)
    result = app.test_cli_runner().invoke(args=["worker", "--burst"])
    assert result.exit_code != 0 and "REDIS_URL" in result.output
    with app.app_context():
        db.session.remove()


def test_a_worker_stops_without_waiting_out_its_pubsub_thread(app):
    """A stopping worker (the end of --burst, SIGTERM) ends its command channel's thread. RQ
    leaves that thread in a wait of up to 60 s once the channel is unsubscribed; a redis-py that
    joins the thread on stop (8.2) made workers hang that long at exit, one in a few under load."""
    import threading

    from jobs.worker import AppSimpleWorker

    queue = rq_queue(app)
    worker = AppSimpleWorker([queue], connection=queue.connection, app=app)
    worker.subscribe()
    wait_until(lambda: worker.pubsub.subscribed, 10, "the command channel subscribed")
    worker.pubsub.unsubscribe()
    wait_until(lambda: not worker.pubsub.subscribed, 10, "the channel's unsubscribe answered")
    time.sleep(0.2)  # the thread's loop goes round into its wait for a new subscription
    stopping = threading.Thread(target=worker.unsubscribe, daemon=True)
    stopping.start()
    stopping.join(timeout=10)
    assert not stopping.is_alive(), "the worker waits on its pubsub thread to stop"


def test_a_burst_worker_with_redis_unreachable_prints_one_line_and_exits_1(app, tmp_path):
    """SPEC §11: `worker --burst` has nothing to wait for (a long-running worker waits, §9)."""
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with worker_processes(1, tmp_path, burst=True,
                          REDIS_URL=f"redis://127.0.0.1:{port}/0") as (worker,):
        assert worker.wait(timeout=60) == 1
    lines = [line for line in (tmp_path / "worker-0.log").read_text().splitlines() if line]
    assert len(lines) == 1 and "Redis" in lines[0], lines
