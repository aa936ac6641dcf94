"""Benchmark 2: 10,000 signed completion webhooks at concurrency 32, then the same again.

Throughput is compared with the floor (`bench/floor_app.py`: the same durable work, nothing
more) and the trivial endpoint, sent the same way; the RQ queue is counted afterwards (no
worker runs) to prove exactly 10,000 jobs, none lost, none twice.
"""

from __future__ import annotations

import contextlib
import json
import statistics
import time
import uuid
from dataclasses import dataclass

import redis
from rq import Queue

from app.platform.webhook import signature
from bench import loadgen
from bench.common import (
    BENCH_NAMESPACE,
    BENCH_REDIS_URL,
    FLOOR_QUEUE,
    WEBHOOK_SECRET,
    Table,
    gunicorn,
    ratio,
    raw_connection,
    verdict,
)

EVENTS = 10_000
USERS = 1_000
CONCURRENCY = 32
ROUNDS = 10
WARM_EVENTS = 2_000
PATH = "/api/v1/webhooks/task-completed"
FLOOR_PATH = "/floor/webhook"
THREADS = int(__import__("os").environ.get("BENCH_THREADS", "1"))
# The service's queue under the bench's namespace (SPEC §11).
QUEUE = f"memory:{BENCH_NAMESPACE}"
# Issue 37: at least the floor's req/s (the same durable work, fewer round trips), p99 within 1.2x.
RPS_TARGET = 1.0
P99_TARGET = 1.2


def prepare() -> None:
    """1,000 users with auto-capture on; no events, sessions or jobs left from earlier runs."""
    with contextlib.closing(raw_connection()) as conn, conn.cursor() as cur:
        for table in ("webhook_event", "session", "memory_job_outcome"):
            cur.execute(f"DELETE FROM `{table}`")
        cur.execute("DELETE FROM user_memory_preference")
        cur.execute("DELETE FROM user WHERE username IS NULL")
        now = time.strftime("%Y-%m-%d %H:%M:%S")
        cur.executemany("INSERT INTO user (id, is_admin, created_at) VALUES (%s, 0, %s)",
                        [(1_000_000 + u, now) for u in range(USERS)])
        cur.executemany("INSERT INTO user_memory_preference (user_id, auto_capture_enabled, "
                        "created_at, updated_at) VALUES (%s, 1, %s, %s)",
                        [(1_000_000 + u, now, now) for u in range(USERS)])
    redis.Redis.from_url(BENCH_REDIS_URL).flushdb()


def bodies(run_id: str) -> list[bytes]:
    return [json.dumps({
        "eventId": f"bench-{run_id}-{i}", "sessionId": 5_000_000 + i,
        "userId": 1_000_000 + i % USERS, "projectKey": ("mao", "blog", "infra")[i % 3],
        "workspace": None, "sessionType": "NORMAL", "channel": "WEB", "phase": "COMPLETED",
        "lastUserMessage": f"第 {i} 个任务:以后报告都用中文写,我们仓库用 pnpm 管理依赖",
        "lastAssistantMessage": "好的,已按要求完成。",
    }, ensure_ascii=False).encode() for i in range(EVENTS)]


def _reasons(run: Figures) -> dict[str, int]:
    counts: dict[str, int] = {}
    for status, body in zip(run.statuses, run.bodies, strict=True):
        key = json.loads(body)["data"]["reason"] if status == 202 else f"HTTP {status}"
        counts[key] = counts.get(key, 0) + 1
    return counts


def signed_for(path: str, raw_bodies: list[bytes]) -> list[bytes]:
    ts = str(int(time.time()))
    return [loadgen.request("POST", path, body, {
        "Content-Type": "application/json", "X-Memory-Timestamp": ts,
        "X-Memory-Signature": signature(WEBHOOK_SECRET, ts, body)}) for body in raw_bodies]


@dataclass(frozen=True)
class Figures:
    """What a table row shows of one or more runs: req/s and latencies (medians over rounds),
    and every answer."""

    rps: float
    p50_ms: float
    p99_ms: float
    runs: list[loadgen.Run]

    @classmethod
    def of(cls, runs: list[loadgen.Run]) -> Figures:
        return cls(statistics.median(r.rps for r in runs),
                   statistics.median(r.percentile(50) for r in runs),
                   statistics.median(r.percentile(99) for r in runs), runs)

    @property
    def statuses(self) -> list[int]:
        return [x for r in self.runs for x in r.statuses]

    @property
    def bodies(self) -> list[bytes]:
        return [x for r in self.runs for x in r.bodies]


def run(tables: list[Table]) -> None:
    prepare()
    raw_bodies = bodies(uuid.uuid4().hex[:8])
    table = Table(f"Webhook ingest: {EVENTS:,} signed POST /api/v1/webhooks/task-completed, "
                  f"concurrency {CONCURRENCY} (gunicorn -w 2, Redis + MariaDB)",
                  ["run", "req/s", "p50 ms", "p99 ms", "vs floor req/s", "p99 vs floor",
                   "answers"])
    trivial_requests = [loadgen.request("GET", "/healthz")] * EVENTS
    chunk = EVENTS // ROUNDS
    with gunicorn("bench.floor_app:app", threads=THREADS) as port:
        loadgen.send(port, trivial_requests[:500], CONCURRENCY)  # warm both workers
        # Warm both paths — their code, connections and the pages of the tables they touch — as
        # the context bench warms its own; then start again from empty tables and queues.
        warm = bodies(f"warm-{uuid.uuid4().hex[:8]}")[:WARM_EVENTS]
        for path in (FLOOR_PATH, PATH):
            loadgen.send(port, signed_for(path, warm), CONCURRENCY)
        prepare()
        trivial = Figures.of([loadgen.send(port, trivial_requests, CONCURRENCY)])
        floor_runs, first_runs = [], []
        # The floor and the endpoint take turns, a tenth of the events each time, so a
        # neighbour's burst on this shared machine hits both alike.
        for n in range(ROUNDS):
            part = raw_bodies[n * chunk:(n + 1) * chunk]
            floor_runs.append(loadgen.send(port, signed_for(FLOOR_PATH, part), CONCURRENCY))
            first_runs.append(loadgen.send(port, signed_for(PATH, part), CONCURRENCY))
        floor, first = Figures.of(floor_runs), Figures.of(first_runs)
        connection = redis.Redis.from_url(BENCH_REDIS_URL)
        queue, floor_queue = (Queue(name, connection=connection)
                              for name in (QUEUE, FLOOR_QUEUE))
        after_first = queue.count
        job_ids = queue.get_job_ids()
        again = Figures.of([loadgen.send(port, signed_for(PATH, raw_bodies), CONCURRENCY)])
        after_again = queue.count
        floor_jobs = floor_queue.count
    for name, result in (("trivial /healthz", trivial), ("floor (same durable work)", floor),
                         ("webhooks, first time", first), ("same webhooks again", again)):
        answers = (f"HTTP {'/'.join(sorted({str(s) for s in result.statuses}))}: "
                   f"{len(result.statuses):,}" if result in (trivial, floor)
                   else ", ".join(f"{k}: {v:,}" for k, v in sorted(_reasons(result).items())))
        table.add(name, f"{result.rps:,.0f}", f"{result.p50_ms:.1f}", f"{result.p99_ms:.1f}",
                  ratio(result.rps, floor.rps), ratio(result.p99_ms, floor.p99_ms), answers)
    with contextlib.closing(raw_connection()) as conn, conn.cursor() as cur:
        cur.execute("SELECT COUNT(*), COUNT(DISTINCT event_id) FROM webhook_event "
                    "WHERE event_id NOT LIKE 'floor-%'")
        events, distinct_events = cur.fetchone()
    exact = after_first == len(set(job_ids)) == EVENTS and after_again == after_first
    rps_ratio = first.rps / floor.rps
    p99_ratio = first.p99_ms / floor.p99_ms
    table.notes += [
        f"the floor and the endpoint's first time: median of {ROUNDS} rounds of {chunk:,} "
        "events each, taken in turn (as the context bench's slices)",
        f"jobs in queue `{QUEUE}` after the first {EVENTS:,}: {after_first:,} "
        f"({len(set(job_ids)):,} distinct job ids); after the same {EVENTS:,} again: "
        f"{after_again:,} (enqueued {after_again - after_first:,}); the floor queued "
        f"{floor_jobs:,}",
        f"webhook_event rows: {events:,} ({distinct_events:,} distinct event ids)",
        f"target: >= {RPS_TARGET:.2f}x the floor's req/s: {rps_ratio:.2f}x, "
        f"{verdict(rps_ratio >= RPS_TARGET)}",
        f"target: p99 <= {P99_TARGET:.2f}x the floor's: {p99_ratio:.2f}x, "
        f"{verdict(p99_ratio <= P99_TARGET)}",
        f"target: exactly {EVENTS:,} jobs, then 0 more: {verdict(exact)}",
    ]
    tables.append(table)
