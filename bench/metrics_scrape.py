"""Scrape cost of /metrics against history: 10 k and then 1 M job outcome rows.

    .venv/bin/python -m bench.metrics_scrape

Uses its own MariaDB database (`memory_bench_metrics`, dropped and migrated on every run) and a
metrics directory of its own. Each outcome row is also counted into the metrics, as the service
counts a job when it finishes, so the counters hold the same history as the table. For each
size it prints the median time of a scrape, next to the GROUP BY queries the scrape ran before
prometheus-client (the same SQL, inlined here: the service no longer has it).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import random
import shutil
import statistics
import subprocess
import tempfile
import time
from collections import Counter as Tally
from collections.abc import Callable

os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="memory-bench-metrics-")
atexit.register(shutil.rmtree, os.environ["PROMETHEUS_MULTIPROC_DIR"], ignore_errors=True)

from bench.common import ROOT, VENV_BIN, raw_connection  # noqa: E402

DATABASE = "memory_bench_metrics"
DATABASE_URL = f"mysql+pymysql://root@127.0.0.1:3306/{DATABASE}?charset=utf8mb4"
SIZES = (10_000, 1_000_000)
BATCH = 10_000
SCRAPES = 200
OLD_SCRAPES = 5
BOUNDS_MS = (50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 120000)
OUTCOMES = [("extraction", "succeeded", "applied"), ("extraction", "skipped", "auto_capture_off"),
            ("extraction", "skipped", "user_message_too_short"),
            ("extraction", "abandoned", "invalid_output"), ("extraction", "failed", "llm_timeout"),
            ("consolidation", "succeeded", "consolidated")]
# What the scrape ran before (app/metrics.py of 878f5d7): five aggregates over whole tables. They
# get back the covering index they had (migration 0005 drops it), so they run as they did.
OLD_QUERIES = (
    "SELECT kind, status, reason, COUNT(*) FROM memory_job_outcome "
    "GROUP BY kind, status, reason ORDER BY kind, status, reason",
    "SELECT kind, " + ", ".join(f"SUM(CASE WHEN duration_ms <= {b} THEN 1 ELSE 0 END)"
                                for b in BOUNDS_MS)
    + ", SUM(duration_ms), COUNT(*) FROM memory_job_outcome GROUP BY kind ORDER BY kind",
    "SELECT kind, model, SUM(prompt_tokens), SUM(completion_tokens) FROM memory_job_outcome "
    "WHERE model IS NOT NULL AND total_tokens IS NOT NULL GROUP BY kind, model "
    "ORDER BY kind, model",
    "SELECT COALESCE(SUM(rows_in), 0), COALESCE(SUM(rows_out), 0), COALESCE(SUM(merges), 0), "
    "COALESCE(SUM(drops), 0) FROM memory_job_outcome WHERE kind = 'consolidation'",
    "SELECT reason, COUNT(*) FROM webhook_event GROUP BY reason ORDER BY reason",
)


def migrate() -> None:
    with contextlib.closing(raw_connection(None)) as conn, conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{DATABASE}`")
        cur.execute(f"CREATE DATABASE `{DATABASE}` CHARACTER SET utf8mb4 "
                    "COLLATE utf8mb4_unicode_ci")
    subprocess.run([str(VENV_BIN / "flask"), "--app", "wsgi", "db", "upgrade"], cwd=ROOT,
                   env={**os.environ, "DATABASE_URL": DATABASE_URL}, check=True,
                   capture_output=True)
    with contextlib.closing(raw_connection(DATABASE)) as conn, conn.cursor() as cur:
        cur.execute("CREATE INDEX idx_memory_job_outcome_metrics ON memory_job_outcome "
                    "(kind, status, reason, duration_ms)")


def add_outcomes(cur, first: int, count: int) -> None:
    """`count` outcome rows, each also counted into the metrics as the service would."""
    from app import metrics

    rows, tally = [], Tally()
    for n in range(first, first + count):
        kind, status, reason = random.choice(OUTCOMES)
        duration_ms = random.randint(5, 20_000)
        rows.append((kind, f"bench-{n}", 1 + n % 1000, status, reason, "bench-model",
                     1000, 50, 1050, duration_ms))
        tally[kind, status, reason] += 1
        metrics.JOB_DURATION.labels(kind=kind).observe(duration_ms / 1000)
    cur.executemany(
        "INSERT INTO memory_job_outcome (kind, job_id, user_id, status, reason, attempts, model,"
        " prompt_tokens, completion_tokens, total_tokens, inserted, touched, updated, dropped,"
        " demoted, duration_ms, created_at) VALUES (%s, %s, %s, %s, %s, 1, %s, %s, %s, %s,"
        " 0, 0, 0, 0, 0, %s, NOW(6))", rows)
    for (kind, status, reason), jobs in tally.items():
        metrics.JOBS.labels(kind=kind, status=status, reason=reason).inc(jobs)
        metrics.LLM_TOKENS.labels(kind=kind, model="bench-model", type="prompt").inc(1000 * jobs)


def median_ms(run: Callable[[], object], times: int) -> float:
    samples = []
    for _ in range(times):
        started = time.perf_counter()
        run()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def main() -> None:
    migrate()
    os.environ["DATABASE_URL"] = DATABASE_URL
    os.environ.pop("REDIS_URL", None)
    from app import create_app

    client = create_app().test_client()
    print(f"{'outcome rows':>14} {'/metrics (ms)':>14} {'old GROUP BYs (ms)':>19}")
    with contextlib.closing(raw_connection(DATABASE)) as conn, conn.cursor() as cur:
        rows = 0
        for size in SIZES:
            while rows < size:
                add_outcomes(cur, rows, min(BATCH, size - rows))
                rows += min(BATCH, size - rows)
            cur.execute("ANALYZE TABLE memory_job_outcome")
            cur.fetchall()

            def scrape() -> None:
                assert client.get("/metrics").status_code == 200

            def old() -> None:
                for query in OLD_QUERIES:
                    cur.execute(query)
                    cur.fetchall()

            print(f"{rows:>14,} {median_ms(scrape, SCRAPES):>14.2f} "
                  f"{median_ms(old, OLD_SCRAPES):>19.1f}", flush=True)


if __name__ == "__main__":
    main()
