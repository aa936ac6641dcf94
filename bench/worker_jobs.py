"""Benchmark 3: the extraction worker against an LLM that answers instantly.

- jobs/s of one real `flask --app wsgi worker --burst`, 1,000 jobs, forking a work horse per job
  (the default) and with `--no-fork`, next to a stock forking RQ worker on no-op jobs, from a
  small process (`rq worker`) and from one our worker's size (`bench.rq_sized_worker`), and
  what a forking worker of ours would cost if its horse cost nothing;
- in-process (one AppSimpleWorker, no fork, warmed up as the worker warms up) with 0, 100 and
  200 existing machine-made memories: SQL round trips and statements per job (counted at the
  driver, so the batches' round trips and the ORM's statements alike), per-job time outside the
  LLM call, prompt size, next to what RQ itself spends on a job that does nothing.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

import redis

from app.extraction.queue import RESULT_TTL_S
from bench.common import (
    BENCH_REDIS_URL,
    ROOT,
    STUB_KEY_ENV,
    VENV_BIN,
    Table,
    app_env,
    fresh_capturing_users,
    insert_memory_rows,
    llm_stub,
    raw_connection,
    use_stub_model,
    verdict,
)

JOBS = 1_000
PER_SCENARIO = 100
EXISTING = (0, 100, 200)
# Our own time per job against RQ's own cost of a no-op job measured in the same run: an
# absolute figure moved from 3.6 to 10.1 ms with the load of the machine for the same code.
OURS_TARGET_RQ_MULTIPLE = 3
# One forking worker (the production default) against a stock `rq worker` forking a work horse
# for a no-op job, both started and timed the same way in the same run: what forking costs RQ
# itself, so what is above it is ours (issue 37).
FORKING_TARGET_RQ_MULTIPLE = 2
RQ_FORK_QUEUE = "bench-no-op-fork"
# At 200 memories an insert first makes room (D14): the words are looked up among the user's
# own (a known wording is a re-confirmation, not a reason to demote) and the group's oldest
# machine-made row is found — with the user lock, when the comparison set showed the pool
# full (as here; a job's later inserts take one round trip each); the demotion rides with the
# insert, its journal row with the others — four statements more per demotion, no round trip.
D14_EXTRA_ROUND_TRIPS = 0
D14_EXTRA_STATEMENTS = 4
USER_BASE = 2_000_000


def _prepare(base_url: str) -> None:
    """Users with auto-capture on, no memories or outcomes of earlier runs, the stub model."""
    with contextlib.closing(raw_connection()) as conn, conn.cursor() as cur:
        cur.execute("DELETE FROM memory_job_outcome")
        use_stub_model(cur, base_url)
        fresh_capturing_users(cur, [USER_BASE + u for u in range(1, 20)])
    redis.Redis.from_url(BENCH_REDIS_URL).flushdb()


def _seed_machine_rows(user_id: int, count: int) -> None:
    from app.memory.rules import dedup_hash

    rows = []
    for i in range(count):
        content = f"已有的记忆 {i}:部署前先跑 pnpm test,报告用中文写"
        at = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(time.time() - 86400 + i))
        rows.append((user_id, "USER", "", content, "AUTO", "ACTIVE",
                     dedup_hash("USER", "", content), at, at))
    with contextlib.closing(raw_connection()) as conn, conn.cursor() as cur:
        insert_memory_rows(cur, rows)


def _payload(user_id: int, i: int) -> dict[str, Any]:
    return {"event_id": f"bench-{i}", "user_id": user_id, "session_id": 9_000_000 + i,
            "project_key": None,
            "user_message": f"第 {i} 个任务:以后所有报告都用中文写,我们的仓库统一用 pnpm 管理依赖",
            "assistant_message": "好的,已用中文完成报告,并用 pnpm 安装了依赖。"}


def _enqueue(app: Any, payloads: list[dict[str, Any]]) -> None:
    from app.extraction.queue import memory_queue
    from jobs import EXTRACTION

    run = uuid.uuid4().hex[:8]
    with app.app_context():
        queue = memory_queue()
        for n, payload in enumerate(payloads):
            queue.enqueue(EXTRACTION, payload, f"bench-{run}-{n}")


@dataclass(frozen=True)
class Burst:
    """One `--burst` worker process run to its end: how long it took, and the largest resident
    size the worker process itself reached (MB; its horses are not counted)."""

    seconds: float
    max_rss_mb: float


def _resident_mb(pid: int) -> float:
    """The process's resident size now, 0 once it is gone. Read from /proc while it runs: the
    peak `wait4` reports also holds what the process was before its exec (this bench)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _burst(argv: list[str], **env: str) -> Burst:
    # Its log goes to a file: a pipe nobody reads while it runs would fill and stop it.
    with tempfile.TemporaryFile() as log:
        began = time.perf_counter()
        process = subprocess.Popen(argv, cwd=ROOT, env=app_env(**env),
                                   stdout=subprocess.DEVNULL, stderr=log)
        sizes: list[float] = []
        done = threading.Event()

        def sample() -> None:
            while not done.wait(0.05):
                sizes.append(_resident_mb(process.pid))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        process.wait()
        elapsed = time.perf_counter() - began
        done.set()
        sampler.join()
        if process.returncode != 0:
            log.seek(0)
            raise RuntimeError(f"{' '.join(argv[:3])} failed:\n"
                               + log.read().decode("utf-8", "replace")[-2000:])
    return Burst(elapsed, max(sizes, default=0.0))


def _our_burst(fork: bool) -> Burst:
    return _burst([str(VENV_BIN / "flask"), "--app", "wsgi", "worker", "--burst",
                   "--fork" if fork else "--no-fork"], **{STUB_KEY_ENV: "bench"})


def rq_forking(sized: bool, jobs: int = JOBS) -> tuple[float, float]:
    """(ms per job, peak MB) of a stock forking `rq.Worker` on a no-op job, started and timed as
    our worker is (`_our_burst`): process start-up, measured with nothing queued, excluded.
    `sized`: RQ's Worker class in a process the size of ours (`bench.rq_sized_worker`), else
    the `rq worker` command."""
    from rq import Queue

    argv = ([str(VENV_BIN / "python"), "-m", "bench.rq_sized_worker", BENCH_REDIS_URL,
             RQ_FORK_QUEUE] if sized else
            [str(VENV_BIN / "rq"), "worker", "--burst", "--quiet", "--logging_level",
             "WARNING", "--url", BENCH_REDIS_URL, RQ_FORK_QUEUE])
    connection = redis.Redis.from_url(BENCH_REDIS_URL)
    queue = Queue(RQ_FORK_QUEUE, connection=connection)
    queue.empty()
    empty = _burst(argv)
    run = uuid.uuid4().hex[:8]
    with connection.pipeline() as pipe:
        for n in range(jobs):
            queue.enqueue_call("json.dumps", args=({"n": n},), job_id=f"no-op-{run}-{n}",
                               result_ttl=RESULT_TTL_S, pipeline=pipe)
        pipe.execute()
    busy = _burst(argv)
    left = queue.count
    connection.close()
    if left:
        raise RuntimeError(f"{left} no-op jobs were left in {RQ_FORK_QUEUE}")
    return (busy.seconds - empty.seconds) / jobs * 1000, busy.max_rss_mb


def _outcomes(where: str = "kind = 'extraction'") -> dict[str, Any]:
    with contextlib.closing(raw_connection()) as conn, conn.cursor() as cur:
        cur.execute("SELECT status, COUNT(*), AVG(prompt_chars), AVG(duration_ms) "
                    f"FROM memory_job_outcome WHERE {where} GROUP BY status")
        return {row[0]: row[1:] for row in cur.fetchall()}


def _consolidations() -> str:
    """The D15 jobs the extractions triggered: the stub answers every call as an extraction,
    which a consolidation rejects as invalid output."""
    with contextlib.closing(raw_connection()) as conn, conn.cursor() as cur:
        cur.execute("SELECT status, reason, COUNT(*) FROM memory_job_outcome "
                    "WHERE kind = 'consolidation' GROUP BY status, reason")
        found = cur.fetchall()
    return ", ".join(f"{n:,} {status} ({reason})" for status, reason, n in found) or "none"


def _rq_alone_ms(jobs: int = 500) -> float:
    """ms per job RQ itself spends (dequeue, bookkeeping, result) on a job that does nothing,
    run as the in-process figures are: the part of a job's time that is not ours."""
    from rq import Queue, SimpleWorker

    connection = redis.Redis.from_url(BENCH_REDIS_URL)
    queue = Queue("bench-no-op", connection=connection)
    for n in range(jobs):
        queue.enqueue_call("json.dumps", args=({"n": n},), job_id=f"no-op-{n}", unique=True,
                           result_ttl=RESULT_TTL_S)
    worker = SimpleWorker([queue], connection=connection)
    began = time.perf_counter()
    worker.work(burst=True, logging_level="WARNING")
    elapsed = time.perf_counter() - began
    connection.close()
    return elapsed / jobs * 1000


def _demotions(user_id: int) -> int:
    """D14 demotions journaled for the user so far (earlier runs' included)."""
    with contextlib.closing(raw_connection()) as conn, conn.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM memory_event WHERE user_id = %s AND type = 'DEMOTED'",
                    (user_id,))
        return cur.fetchone()[0]


@dataclass
class SqlCount:
    """What the job sends to MariaDB, watched at the driver (pymysql): every command is a round
    trip (queries, COMMIT/ROLLBACK, pings); a multi-statement query counts its statements."""

    round_trips: int = 0
    statements: int = 0

    @contextlib.contextmanager
    def watching(self) -> Any:
        import pymysql.connections
        from pymysql.constants import COMMAND

        send = pymysql.connections.Connection._execute_command

        def counted(connection: Any, command: int, sql: Any) -> Any:
            self.round_trips += 1
            if command == COMMAND.COM_QUERY:
                text = sql if isinstance(sql, str) else sql.decode("utf-8", "replace")
                self.statements += text.count(";\n") + 1
            return send(connection, command, sql)

        pymysql.connections.Connection._execute_command = counted
        try:
            yield self
        finally:
            pymysql.connections.Connection._execute_command = send


def _warm_up(app: Any) -> None:
    """What `flask worker` does before it works (jobs.worker.run_worker)."""
    from app.extraction import llm, runner

    with app.app_context():
        llm.warm_up()
        runner.warm_up()


def _in_process(app: Any, user_id: int) -> tuple[float, float, float, float, float, float]:
    """(round trips/job, statements/job, ms/job outside the LLM call, LLM ms/job,
    prompt chars/job, credential detector ms/job)."""
    import openai.resources.chat.completions as chat
    from rq import Queue

    from app.memory import memories
    from jobs.worker import AppSimpleWorker

    _enqueue(app, [_payload(user_id, i) for i in range(PER_SCENARIO)])
    llm_seconds = [0.0]
    create = chat.Completions.create

    def timed_create(self: Any, *args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        try:
            return create(self, *args, **kwargs)
        finally:
            llm_seconds[0] += time.perf_counter() - began

    # The credential detector (SPEC §11) runs on every candidate: its share of our time.
    detector_seconds = [0.0]
    detect = memories.credential

    def timed_detect(content: str) -> Any:
        began = time.perf_counter()
        try:
            return detect(content)
        finally:
            detector_seconds[0] += time.perf_counter() - began

    connection = redis.Redis.from_url(BENCH_REDIS_URL)
    with app.app_context():
        name = app.extensions["memory_queue"].rq_queue().name
    worker = AppSimpleWorker([Queue(name, connection=connection)],
                             connection=connection, app=app)
    chat.Completions.create = timed_create
    memories.credential = timed_detect
    try:
        with SqlCount().watching() as sql:
            began = time.perf_counter()
            # Warnings only: RQ logs four lines per job, which would flood the report.
            worker.work(burst=True, logging_level="WARNING")
            wall = time.perf_counter() - began
    finally:
        chat.Completions.create = create
        memories.credential = detect
        connection.close()
    outcome = _outcomes(f"kind = 'extraction' AND user_id = {user_id}")
    prompt_chars = float(outcome["succeeded"][1]) if "succeeded" in outcome else 0.0
    return (sql.round_trips / PER_SCENARIO, sql.statements / PER_SCENARIO,
            (wall - llm_seconds[0]) / PER_SCENARIO * 1000,
            llm_seconds[0] / PER_SCENARIO * 1000, prompt_chars,
            detector_seconds[0] / PER_SCENARIO * 1000)


def run(tables: list[Table]) -> None:
    table = Table("Extraction worker: scripted LLM answering instantly",
                  ["measure", "value", "baseline", "ratio / note"])
    with llm_stub() as base_url:
        os.environ[STUB_KEY_ENV] = "bench"
        os.environ.update({k: v for k, v in app_env().items()
                           if k in ("DATABASE_URL", "REDIS_URL", "MEMORY_REDIS_NAMESPACE")})
        import jobs
        from app import create_app

        app = create_app()
        jobs.init_app(app)
        per_job: dict[bool, float] = {}
        our_rss: dict[bool, float] = {}
        for fork, name in ((True, "forking worker"), (False, "worker --no-fork")):
            _prepare(base_url)
            empty = _our_burst(fork)  # process start-up, nothing queued
            _enqueue(app, [_payload(USER_BASE + 1 + i % 10, i) for i in range(JOBS)])
            busy = _our_burst(fork)
            seconds = busy.seconds - empty.seconds
            per_job_ms = per_job[fork] = seconds / JOBS * 1000
            our_rss[fork] = busy.max_rss_mb
            done = _outcomes()
            table.add(f"{JOBS:,} jobs, one {name}", f"{JOBS / seconds:,.1f} jobs/s",
                      f"start-up {empty.seconds:.2f} s excluded",
                      f"{per_job_ms:.1f} ms/job incl. LLM call; extraction outcomes: "
                      + ", ".join(f"{k} {v[0]:,}" for k, v in sorted(done.items()))
                      + f" ({float(done['succeeded'][2]):.1f} ms in the job itself); "
                      f"consolidations triggered: {_consolidations()}; {busy.max_rss_mb:.0f} MB")
        rq_fork_ms, rq_rss = rq_forking(sized=False)
        forking_multiple = per_job[True] / rq_fork_ms
        table.add(f"{JOBS:,} no-op jobs, one stock forking `rq worker`",
                  f"{1000 / rq_fork_ms:,.1f} jobs/s", "start-up excluded",
                  f"{rq_fork_ms:.1f} ms/job: what forking a work horse costs RQ itself "
                  f"({rq_rss:.0f} MB); ours forking = {forking_multiple:.2f}x it "
                  f"(<= {FORKING_TARGET_RQ_MULTIPLE}x: "
                  f"{verdict(forking_multiple <= FORKING_TARGET_RQ_MULTIPLE)}), "
                  f"--no-fork = {per_job[False] / rq_fork_ms:.2f}x")
        sized_fork_ms, sized_rss = rq_forking(sized=True)
        table.add(f"{JOBS:,} no-op jobs, stock `rq.Worker` in a process our worker's size",
                  f"{1000 / sized_fork_ms:,.1f} jobs/s", "start-up excluded",
                  f"{sized_fork_ms:.1f} ms/job = {sized_fork_ms / rq_fork_ms:.2f}x the stock "
                  f"`rq worker`'s: the same fork from {sized_rss:.0f} MB "
                  f"(our forking worker: {our_rss[True]:.0f} MB)")
        figures = []
        _warm_up(app)
        for n, existing in enumerate(EXISTING):
            user_id = USER_BASE + 11 + n
            _seed_machine_rows(user_id, existing)
            demoted_before = _demotions(user_id)
            figures.append((existing, *_in_process(app, user_id),
                            (_demotions(user_id) - demoted_before) / PER_SCENARIO))
        rq_ms = _rq_alone_ms()
        table.add("RQ alone: a no-op job, in-process", f"{rq_ms:.1f} ms/job", "",
                  "what RQ itself costs each job below; the rest is ours")
        # A forking worker whose horse paid nothing for being one (no copy-on-write, no
        # connection of its own to open): RQ forking from a process our size, plus our job's
        # own work as the non-forking worker does it (its ms/job less RQ's own share).
        free_horse_ms = sized_fork_ms + per_job[False] - rq_ms
        free_horse_multiple = free_horse_ms / rq_fork_ms
        horse_budget_ms = FORKING_TARGET_RQ_MULTIPLE * rq_fork_ms - free_horse_ms
        table.add("forking worker, if its horse cost nothing", f"{free_horse_ms:.1f} ms/job",
                  f"{rq_fork_ms:.1f} ms/job (stock `rq worker`)",
                  f"{free_horse_multiple:.2f}x: {sized_fork_ms:.1f} (RQ forking from our size) "
                  f"+ {per_job[False]:.1f} (--no-fork) - {rq_ms:.1f} (RQ's share of it); "
                  f"what a horse itself costs us: {per_job[True] - free_horse_ms:.1f} ms/job")
        base_trips, base_statements = figures[0][1], figures[0][2]
        for (existing, trips, statements, overhead_ms, llm_ms, prompt_chars, detector_ms,
             demoted) in figures:
            ours_ms = overhead_ms - rq_ms
            # Flat: nothing more for more memories, except D14's for each demoted row.
            flat = (trips <= base_trips + D14_EXTRA_ROUND_TRIPS * demoted
                    and statements <= base_statements + D14_EXTRA_STATEMENTS * demoted)
            table.add(f"in-process, {existing} existing memories",
                      f"{trips:.1f} round trips ({statements:.1f} statements)/job",
                      f"{base_trips:.1f} ({base_statements:.1f}) at 0",
                      f"{demoted:.1f} D14 demotions/job (flat: {verdict(flat)}); "
                      f"{overhead_ms:.1f} ms/job outside the LLM call (LLM {llm_ms:.1f} ms), "
                      f"{ours_ms:.1f} ms of it ours = {ours_ms / rq_ms:.2f}x RQ's no-op job "
                      f"(<= {OURS_TARGET_RQ_MULTIPLE}x: "
                      f"{verdict(ours_ms <= OURS_TARGET_RQ_MULTIPLE * rq_ms)}); "
                      f"credential detector {detector_ms * 1000:.0f} µs/job = "
                      f"{detector_ms / ours_ms:.1%} of ours; {prompt_chars:,.0f} prompt chars")
        with app.app_context():
            from app.extensions import db

            db.engine.dispose()
    table.notes += [
        f"target: one forking worker's ms/job <= {FORKING_TARGET_RQ_MULTIPLE}x a stock forking "
        f"`rq worker`'s on a no-op job, same run, same Redis: {forking_multiple:.2f}x, "
        f"{verdict(forking_multiple <= FORKING_TARGET_RQ_MULTIPLE)}; a horse that cost "
        f"nothing would already be {free_horse_multiple:.2f}x (`forking worker, if its horse "
        f"cost nothing`): the target leaves a horse of ours {max(0.0, horse_budget_ms):.1f} "
        f"ms/job, and it costs {per_job[True] - free_horse_ms:.1f}",
        f"at 200 existing memories every insert first demotes the group's oldest machine-made "
        f"row (D14): {D14_EXTRA_STATEMENTS} statements and {D14_EXTRA_ROUND_TRIPS} round trips "
        "more per demotion (its lookups ride with the user lock), not a bigger read; the "
        "consolidation trigger's counts, run once per user before its cooldown, go the other way",
        f"targets: our own time per job (outside the LLM call and RQ's own cost, in process as "
        f"--no-fork runs) <= {OURS_TARGET_RQ_MULTIPLE}x RQ's own no-op job in the same run; "
        "SQL/job flat in the number of existing memories (one comparison-set read)"]
    tables.append(table)
