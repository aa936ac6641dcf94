"""Benchmark 1: the context read under gunicorn, next to a trivial endpoint and the floor.

10,000 users × 200 memories (2 M rows, real hashes, bulk insert) in MariaDB; each request picks
a random user and one of their projects.
"""

from __future__ import annotations

import contextlib
import random
import statistics
import sys
import tempfile
import time

from app.memory.rules import dedup_hash
from bench.common import SERVICE_TOKEN, Load, Table, gunicorn, ratio, raw_connection, wrk

USERS = 10_000
PER_USER = 200
PROJECTS = ("mao", "blog", "infra")
CONCURRENCY = (1, 8, 32)
# Each endpoint gets 10 s per concurrency, in slices taken in turn with the others, so a
# neighbour's burst on this shared machine hits all three alike; the medians are reported.
ROUNDS = 5
SLICE_SECONDS = 2


def seeded_rows() -> int:
    with contextlib.closing(raw_connection()) as conn, conn.cursor() as cur:
        # Only this benchmark's users: the others leave rows of their own users behind.
        cur.execute("SELECT COUNT(*) FROM memory_item WHERE user_id BETWEEN 1 AND %s", (USERS,))
        return cur.fetchone()[0]


def _user_rows(user_id: int, start: float) -> list[tuple]:
    rows = []
    for i in range(PER_USER):
        scope, key = ("USER", "") if i % 10 < 3 else ("PROJECT", PROJECTS[i % 3])
        content = f"用户 {user_id} 的第 {i} 条长期记忆:we use pnpm and write reports in 中文"
        status = "DISMISSED" if i % 10 == 9 else "ACTIVE"
        source = "MANUAL" if i % 4 == 0 else "AUTO"
        at = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(start + i)) + f".{i:06d}"
        rows.append((user_id, scope, key, content, source, status,
                     dedup_hash(scope, key, content), at, at))
    return rows


def seed(force: bool = False) -> float:
    """Bulk-load the 2 M rows (skipped when already there); returns seconds spent."""
    if not force and seeded_rows() == USERS * PER_USER:
        return 0.0
    began = time.perf_counter()
    start = time.time() - 10 * 86400
    with contextlib.closing(raw_connection()) as conn, conn.cursor() as cur:
        cur.execute("TRUNCATE memory_item")
        cur.execute("SET unique_checks = 0")
        batch: list[tuple] = []
        for user_id in range(1, USERS + 1):
            batch += _user_rows(user_id, start)
            if len(batch) >= 10_000:
                cur.executemany(
                    "INSERT INTO memory_item (user_id, scope, project_key, content, source, "
                    "status, dedup_hash, created_at, updated_at) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)", batch)
                batch = []
        cur.execute("SET unique_checks = 1")
        cur.execute("ANALYZE TABLE memory_item")
    return time.perf_counter() - began


def explain() -> list[str]:
    """EXPLAIN of the two reads the endpoint sends."""
    from bench.floor_app import PROJECT_SQL, USER_SQL

    lines = []
    with contextlib.closing(raw_connection()) as conn, conn.cursor() as cur:
        for name, sql, args in (("PROJECT", PROJECT_SQL, (4242, "mao")),
                                ("USER", USER_SQL, (4242,))):
            cur.execute("EXPLAIN " + sql, args)
            columns = [c[0] for c in cur.description]
            for row in cur.fetchall():
                r = dict(zip(columns, row, strict=True))
                lines.append(f"EXPLAIN {name}: type={r['type']} key={r['key']} "
                             f"rows={r['rows']} Extra={r['Extra']}")
    return lines


def _script(path: str, token: str | None) -> str:
    """A wrk script that spreads requests over random users and their projects."""
    header = f'wrk.headers["Authorization"] = "Bearer {token}"\n' if token else ""
    script = tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False)
    script.write(header + f"""
math.randomseed({random.randint(1, 10**6)})
local projects = {{"mao", "blog", "infra"}}
request = function()
  local uid = math.random(1, {USERS})
  return wrk.format("GET", "{path}?userId=" .. uid .. "&projectKey=" .. projects[uid % 3 + 1])
end
""")
    script.close()
    return script.name


def _median(loads: list[Load]) -> Load:
    """Median throughput and latencies of the slices; requests and errors summed."""
    return Load(statistics.median(x.rps for x in loads),
                statistics.median(x.p50_ms for x in loads),
                statistics.median(x.p99_ms for x in loads),
                sum(x.requests for x in loads), sum(x.errors for x in loads))


def run(table_out: list[Table], *, force_seed: bool = False) -> None:
    seconds = seed(force_seed)
    table = Table("Context read: GET /api/v1/internal/memory/context (gunicorn -w 2, "
                  f"{USERS:,} users x {PER_USER} memories)",
                  ["conc", "endpoint", "req/s", "p50 ms", "p99 ms", "vs floor req/s",
                   "p99 vs floor", "errors"])
    if seconds:
        table.notes.append(f"seeded {USERS * PER_USER:,} rows in {seconds:.0f} s")
    table.notes += explain()
    scripts = {
        "trivial /healthz": None,
        "floor (raw cursor)": _script("/floor/context", None),
        "context endpoint": _script("/api/v1/internal/memory/context", SERVICE_TOKEN),
    }
    paths = {"trivial /healthz": "/healthz"}
    with gunicorn("bench.floor_app:app") as port:
        base = f"http://127.0.0.1:{port}"
        # Warm the buffer pool and every worker before measuring.
        wrk(base + "/floor/context", connections=8, seconds=3, script=scripts["floor (raw cursor)"])
        for conc in CONCURRENCY:
            slices: dict[str, list[Load]] = {name: [] for name in scripts}
            for _ in range(ROUNDS):
                for name, script in scripts.items():
                    slices[name].append(wrk(base + paths.get(name, "/"), connections=conc,
                                            seconds=SLICE_SECONDS, script=script))
            results = {name: _median(loads) for name, loads in slices.items()}
            floor = results["floor (raw cursor)"]
            for name, load in results.items():
                table.add(conc, name, f"{load.rps:,.0f}", f"{load.p50_ms:.2f}",
                          f"{load.p99_ms:.2f}", ratio(load.rps, floor.rps),
                          ratio(load.p99_ms, floor.p99_ms), load.errors)
    table.notes += [f"each figure: median of {ROUNDS} slices of {SLICE_SECONDS} s, the three "
                    "endpoints taken in turn",
                    "targets: context >= 0.80x floor req/s, p99 <= 2.00x floor p99"]
    table_out.append(table)


if __name__ == "__main__":
    tables: list[Table] = []
    run(tables, force_seed="--reseed" in sys.argv)
    for t in tables:
        print(t.render())
