"""A routine worker restart loses nothing under Sentinel (SPEC §11 "Workers"): SIGTERM stops an
idle worker within seconds, its blocking dequeue does not outlive it to pop the next job, and
every delivery accepted afterwards gets exactly one outcome. Real Redis, replica and Sentinels,
real forking workers."""

from __future__ import annotations

import signal
import subprocess

import pytest
import redis

from app import redis_connection
from tests.cluster.conftest import RedisSentinel
from tests.completions import capture_on, event, outcomes, post_webhook, queue_name
from tests.conftest import WEBHOOK_SECRET, _empty_tables
from tests.workers import wait_until, worker_processes

pytestmark = pytest.mark.xdist_group("cluster")


def _idle(ha: RedisSentinel, pid: int, queue: str) -> bool:
    """The worker of process `pid` is registered and waits for jobs (its signal handlers are
    installed by then), with nothing left to take: the queue and RQ's intermediate list of it
    are empty. (A SIGTERM that lands while a job is being popped leaves that job in the
    intermediate list, run once maintenance finds it: tests/jobs/test_never_blind.py.)"""
    from rq import Queue, Worker

    client = redis_connection.client(ha.url)
    try:
        rq_queue = Queue(queue, connection=client)
        drained = rq_queue.count == 0 and not rq_queue.intermediate_queue.get_job_ids()
        return drained and any(w.pid == pid and w.get_state() == "idle"
                               for w in Worker.all(connection=client))
    except redis.ConnectionError:
        return False
    finally:
        client.close()


def test_idle_workers_stop_on_sigterm_and_the_deliveries_after_them_are_all_learnt(
        make_app, redis_sentinel, llm, tmp_path):
    app = make_app(REDIS_URL=redis_sentinel.url)
    _empty_tables(app)
    redis_connection.client(redis_sentinel.url).flushdb()
    capture_on(app)
    from app.extensions import db
    from app.system import service as system

    with app.app_context():
        system.add_model("scripted", "scripted-default", base_url=llm.base_url, default=True)
        db.session.remove()
    client = app.test_client()
    queue = queue_name(app)
    rounds = 3
    for n in range(rounds):
        (tmp_path / f"round-{n}").mkdir()
        with worker_processes(1, tmp_path / f"round-{n}", REDIS_URL=redis_sentinel.url) as (
                worker,):
            wait_until(lambda: _idle(redis_sentinel, worker.pid, queue), 60, "an idle worker")
            worker.send_signal(signal.SIGTERM)
            try:
                assert worker.wait(timeout=15) == 0, "the worker did not exit on SIGTERM"
            except subprocess.TimeoutExpired:
                pytest.fail("an idle worker did not stop within 15 s of SIGTERM")
        llm.reply_items([])
        status, body = post_webhook(client, event(sessionId=100 + n), secret=WEBHOOK_SECRET)
        assert (status, body["data"]["reason"]) == (202, "enqueued")
    (tmp_path / "last").mkdir()
    with worker_processes(1, tmp_path / "last", burst=True,
                          REDIS_URL=redis_sentinel.url) as (worker,):
        assert worker.wait(timeout=60) == 0
    done = outcomes(app)
    assert sorted(o["sessionId"] for o in done) == [100 + n for n in range(rounds)]
    assert {(o["status"], o["reason"]) for o in done} == {("succeeded", "nothing_to_remember")}
