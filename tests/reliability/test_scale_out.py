"""Scale-out: two web processes (gunicorn) and two `flask --app wsgi worker` processes on one
database and one Redis, as on several hosts. Every event is processed exactly once whichever
web process received it, however often and wherever it was repeated, and the jobs of one
session never overlap though two workers take them."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from itertools import combinations

from app.platform import client
from tests.completions import capture_on, event, outcomes, rq_job
from tests.conftest import SERVICE_TOKEN, TEST_REDIS_URL, WEBHOOK_SECRET
from tests.serving import gunicorn
from tests.workers import registered_workers, wait_until, worker_processes

SHARED_SESSION = 301
LLM_DELAY_S = 0.5
WEB_ENV = {"REDIS_URL": TEST_REDIS_URL, "MEMORY_WEBHOOK_SECRET": WEBHOOK_SECRET,
           "MEMORY_SERVICE_TOKEN": SERVICE_TOKEN, "SECRET_KEY": "one-key-for-every-web-process",
           "MEMORY_LLM_TIMEOUT_S": "5"}


def _events() -> list[dict]:
    """Eight completions; four of them in one session. Each names itself in its message."""
    sessions = [SHARED_SESSION, SHARED_SESSION, 302, 303, SHARED_SESSION, SHARED_SESSION, 304,
                305]
    return [event(eventId=f"evt-scale-{n}", sessionId=session,
                  lastUserMessage=f"第{n}号任务:以后所有的报告都请用中文来写,谢谢")
            for n, session in enumerate(sessions)]


def _reason(url: str, body: dict) -> str:
    """Deliver `body` signed to the web process at `url`; the webhook's reason."""
    answer = client.deliver(url, WEBHOOK_SECRET, body)
    assert answer.status == 202, answer
    return json.loads(answer.body)["data"]["reason"]


def _overlap(a, b) -> bool:
    return a.started < b.ended and b.started < a.ended


def test_two_web_processes_and_two_workers_process_each_event_once(app, llm, tmp_path):
    capture_on(app)
    bodies = _events()
    for _ in bodies:
        llm.reply_items([], delay=LLM_DELAY_S)
    with (gunicorn(tmp_path, "web-a", **WEB_ENV) as web_a,
          gunicorn(tmp_path, "web-b", **WEB_ENV) as web_b,
          worker_processes(2, tmp_path)):
        wait_until(lambda: registered_workers() == 2, 60, "two registered workers")
        webs = (web_a.url, web_b.url)

        def alternate(n: int) -> list[tuple[str, str]]:
            """First to one web process, then the platform's retry to the other."""
            first, retry = webs[n % 2], webs[1 - n % 2]
            return [(url, _reason(url, bodies[n])) for url in (first, retry)]

        def race(n: int) -> list[tuple[str, str]]:
            """The same event to both web processes at the same instant."""
            start = threading.Barrier(2)

            def post(url: str) -> tuple[str, str]:
                start.wait()
                return url, _reason(url, bodies[n])

            with ThreadPoolExecutor(2) as pool:
                return list(pool.map(post, webs))

        # Every event's deliveries run at the same time as every other event's.
        with ThreadPoolExecutor(len(bodies)) as pool:
            answers = list(pool.map(lambda n: (alternate if n < 4 else race)(n),
                                    range(len(bodies))))
        wait_until(lambda: len(outcomes(app)) == len(bodies), 90, "one outcome per event")

    for n, delivered in enumerate(answers[:4]):
        assert delivered == [(webs[n % 2], "enqueued"), (webs[1 - n % 2], "duplicate_event")]
    for delivered in answers[4:]:
        assert sorted(reason for _, reason in delivered) == ["duplicate_event", "enqueued"]

    done = outcomes(app)
    assert sorted(o["eventId"] for o in done) == sorted(b["eventId"] for b in bodies)
    assert {o["status"] for o in done} == {"succeeded"}
    requests = llm.requests
    assert len(requests) == len(bodies), "one extraction call per distinct event"
    calls = {n: [r for r in requests if f"第{n}号任务" in r.prompt] for n in range(len(bodies))}
    assert all(len(found) == 1 for found in calls.values()), calls

    shared = [calls[n][0] for n, body in enumerate(bodies)
              if body["sessionId"] == SHARED_SESSION]
    assert len(shared) == 4
    for a, b in combinations(shared, 2):
        assert not _overlap(a, b), "two jobs of one session ran at the same time"
    assert any(_overlap(a, b) for a, b in combinations(requests, 2)), \
        "the two workers never ran jobs at the same time"
    workers = {rq_job(app, o["jobId"]).worker_name for o in done}
    assert len(workers) == 2, "both workers took jobs"

