"""Benchmark 4: the same 1,000 conversation turns through this service and through mem0.

mem0 (PyPI `mem0ai`, open source) runs in its own virtualenv (bench/.venv-mem0, created on first
use) against the same instant stub for chat and embeddings, with a local on-disk Qdrant. Ours:
gunicorn (2 workers) + one `flask --app wsgi worker`, on MariaDB and Redis.
- remembering a turn: mem0 `add()` vs our signed webhook until its outcome row is committed;
- reading for a new session (a user with ~200 memories): mem0 `get_all()` / `search()` (in
  process, no HTTP) vs our context endpoint over HTTP;
- next to it, what RQ alone spends forking a work horse for a no-op job from a process our
  worker's size (`bench.rq_sized_worker`): the part of remembering a turn no work of ours
  can remove while the worker forks.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import statistics
import subprocess
import time
from pathlib import Path

from app.platform.webhook import signature
from bench.common import (
    ROOT,
    SERVICE_TOKEN,
    STUB_KEY_ENV,
    VENV_BIN,
    WEBHOOK_SECRET,
    Table,
    app_env,
    fresh_capturing_users,
    gunicorn,
    llm_stub,
    raw_connection,
    use_stub_model,
    verdict,
)
from bench.turns import USERS, turns
from bench.worker_jobs import rq_forking

MEM0_VENV = Path(__file__).resolve().parent / ".venv-mem0"
MEM0_PACKAGE = "mem0ai==2.2.1"
USER_BASE = 3_000_000
CONTEXT_READS = 100
# Issue 37: remembering a turn (the default forking worker) in at most half of mem0's add();
# reading for a new session in at most a tenth of its get_all().
REMEMBER_TARGET = 0.5
READ_TARGET = 0.1
RQ_FLOOR_JOBS = 300


def mem0_python() -> Path:
    """mem0's own virtualenv, never a dependency of the project."""
    python = MEM0_VENV / "bin" / "python"
    if not python.exists():
        subprocess.run(["python3", "-m", "venv", str(MEM0_VENV)], check=True)
        subprocess.run([str(MEM0_VENV / "bin" / "pip"), "install", "-q", MEM0_PACKAGE],
                       check=True)
    return python


def run_mem0(base_url: str) -> dict[str, float]:
    out = subprocess.run([str(mem0_python()), "-m", "bench.peer_mem0_driver", base_url],
                         cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin",
                                        "HOME": "/tmp"},
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _wait_for_outcome(cur, event_id: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        cur.execute("SELECT 1 FROM memory_job_outcome WHERE event_id = %s", (event_id,))
        if cur.fetchone():
            return
        time.sleep(0.001)
    raise RuntimeError(f"no outcome for {event_id}")


def run_ours(base_url: str, *, fork: bool = True) -> dict[str, float]:
    user_ids = [USER_BASE + u for u in range(USERS)]
    with contextlib.closing(raw_connection()) as conn, conn.cursor() as cur:
        use_stub_model(cur, base_url)
        fresh_capturing_users(cur, user_ids)
    env = {STUB_KEY_ENV: "bench"}
    worker = subprocess.Popen([str(VENV_BIN / "flask"), "--app", "wsgi",
                               "worker", "--fork" if fork else "--no-fork"], cwd=ROOT,
                              env=app_env(**env),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    run_id = str(int(time.time()))
    remember_ms: list[float] = []
    read_ms: list[float] = []
    try:
        with gunicorn("wsgi:app", **env) as port, \
                contextlib.closing(raw_connection()) as conn, conn.cursor() as cur:
            client = http.client.HTTPConnection("127.0.0.1", port)
            for i, (user, said, answered) in enumerate(turns()):
                event_id = f"peer-{run_id}-{i}"
                body = json.dumps({
                    "eventId": event_id, "sessionId": 8_000_000 + i,
                    "userId": user_ids[user], "projectKey": None, "sessionType": "NORMAL",
                    "channel": "WEB", "phase": "COMPLETED", "lastUserMessage": said,
                    "lastAssistantMessage": answered}, ensure_ascii=False).encode()
                ts = str(int(time.time()))
                began = time.perf_counter()
                client.request("POST", "/api/v1/webhooks/task-completed", body, {
                    "Content-Type": "application/json", "X-Memory-Timestamp": ts,
                    "X-Memory-Signature": signature(WEBHOOK_SECRET, ts, body)})
                client.getresponse().read()
                _wait_for_outcome(cur, event_id)
                remember_ms.append((time.perf_counter() - began) * 1000)
            headers = {"Authorization": f"Bearer {SERVICE_TOKEN}"}
            for n in range(CONTEXT_READS):
                began = time.perf_counter()
                client.request("GET", "/api/v1/internal/memory/context?userId="
                               f"{user_ids[n % USERS]}", headers=headers)
                client.getresponse().read()
                read_ms.append((time.perf_counter() - began) * 1000)
            client.close()
            cur.execute("SELECT COUNT(*) / %s FROM memory_item WHERE user_id IN "
                        f"({', '.join(str(u) for u in user_ids)}) AND status = 'ACTIVE'",
                        (USERS,))
            per_user = float(cur.fetchone()[0])
    finally:
        worker.terminate()
        worker.wait(30)
    return {"remember_mean_ms": statistics.fmean(remember_ms),
            "remember_p50_ms": statistics.median(remember_ms),
            "context_p50_ms": statistics.median(read_ms), "memories_per_user": per_user}


def run(tables: list[Table]) -> None:
    with llm_stub() as base_url:
        mem0 = run_mem0(base_url)
        ours = run_ours(base_url)
        unforked = run_ours(base_url, fork=False)
    # What RQ alone spends forking a work horse from a process our worker's size, for a job
    # that does nothing: the part of remembering a turn no work of ours can take away.
    rq_floor_ms, _ = rq_forking(sized=True, jobs=RQ_FLOOR_JOBS)
    table = Table("Peer: the same 1,000 turns (5 users x 200) through mem0 2.2.1 and this "
                  "service, same instant LLM stub",
                  ["step", "mem0", "ours", "ours vs mem0"])
    table.add("remember one turn, mean ms (mem0 add() / webhook until committed)",
              f"{mem0['add_mean_ms']:.1f}", f"{ours['remember_mean_ms']:.1f}",
              f"{ours['remember_mean_ms'] / mem0['add_mean_ms']:.2f}x time")
    table.add("remember one turn, p50 ms", f"{mem0['add_p50_ms']:.1f}",
              f"{ours['remember_p50_ms']:.1f}",
              f"{ours['remember_p50_ms'] / mem0['add_p50_ms']:.2f}x time")
    table.add("remember one turn, p50 ms, ours with `worker --no-fork`",
              f"{mem0['add_p50_ms']:.1f}", f"{unforked['remember_p50_ms']:.1f}",
              f"{unforked['remember_p50_ms'] / mem0['add_p50_ms']:.2f}x time")
    table.add("read for a new session, p50 ms (mem0 get_all() / our context over HTTP)",
              f"{mem0['get_all_p50_ms']:.2f}", f"{ours['context_p50_ms']:.2f}",
              f"{ours['context_p50_ms'] / mem0['get_all_p50_ms']:.2f}x time")
    table.add("mem0 search() p50 ms (a query embedding + vector search)",
              f"{mem0['search_p50_ms']:.2f}", f"{ours['context_p50_ms']:.2f}",
              f"{ours['context_p50_ms'] / mem0['search_p50_ms']:.2f}x time")
    remember = ours["remember_mean_ms"] / mem0["add_mean_ms"]
    read = ours["context_p50_ms"] / mem0["get_all_p50_ms"]
    table.notes.append(f"target: remember a turn (mean, forking worker) <= {REMEMBER_TARGET}x "
                       f"mem0's add(): {remember:.2f}x, {verdict(remember <= REMEMBER_TARGET)}")
    table.notes.append(f"of that, RQ alone forking a no-op job from a process our worker's size "
                       f"(`bench.rq_sized_worker`): {rq_floor_ms:.1f} ms = "
                       f"{rq_floor_ms / mem0['add_mean_ms']:.2f}x mem0's add(), before any work "
                       "of ours")
    table.notes.append(f"target: read for a new session (p50) <= {READ_TARGET}x mem0's "
                       f"get_all(): {read:.2f}x, {verdict(read <= READ_TARGET)}")
    table.notes.append(f"memories per user at the end: mem0 {mem0['memories_per_user']:.0f}, "
                       f"ours {ours['memories_per_user']:.0f} ACTIVE (cap 200)")
    table.notes.append("ours includes HTTP, HMAC, the queue, the job (in a forked work horse "
                       "unless --no-fork) and the commit; mem0 runs in the caller's process")
    tables.append(table)
