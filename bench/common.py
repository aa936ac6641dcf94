"""Shared pieces of the benchmarks: the bench database, servers, wrk, and the report table."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pymysql

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
BENCH_DB = os.environ.get("BENCH_DB", "memory_bench")
BENCH_DATABASE_URL = f"mysql+pymysql://root@127.0.0.1:3306/{BENCH_DB}?charset=utf8mb4"
BENCH_REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/1")
SERVICE_TOKEN = "bench-service-token"
WEBHOOK_SECRET = "bench-webhook-secret"
# The service's Redis namespace in the bench (SPEC §11), so the bench can name its keys.
BENCH_NAMESPACE = "bench"
# The RQ queue the webhook floor pushes to (no worker reads it).
FLOOR_QUEUE = "floor-webhook"


def raw_connection(database: str | None = BENCH_DB) -> pymysql.connections.Connection:
    return pymysql.connect(host="127.0.0.1", port=3306, user="root", password="",
                           database=database, charset="utf8mb4", autocommit=True)


def insert_memory_rows(cur: Any, rows: list[tuple]) -> None:
    """Seed `memory_item` with (user_id, scope, project_key, content, source, status,
    dedup_hash, created_at, updated_at) rows, behind the service's back, in one statement."""
    cur.executemany(
        "INSERT INTO memory_item (user_id, scope, project_key, content, source, "
        "status, dedup_hash, created_at, updated_at) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)", rows)


def app_env(**extra: str) -> dict[str, str]:
    """Environment for the service processes under test."""
    env = {**os.environ, "DATABASE_URL": BENCH_DATABASE_URL, "REDIS_URL": BENCH_REDIS_URL,
           "MEMORY_SERVICE_TOKEN": SERVICE_TOKEN, "MEMORY_WEBHOOK_SECRET": WEBHOOK_SECRET,
           "SECRET_KEY": "bench-secret-key", "PYTHONPATH": str(ROOT),
           "MEMORY_REDIS_NAMESPACE": BENCH_NAMESPACE}
    env.update(extra)
    return env


def migrate_fresh() -> None:
    """Drop and re-create the bench database with the project's own migrations."""
    with contextlib.closing(raw_connection(None)) as conn, conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{BENCH_DB}`")
        cur.execute(f"CREATE DATABASE `{BENCH_DB}` CHARACTER SET utf8mb4 "
                    "COLLATE utf8mb4_unicode_ci")
    subprocess.run([str(VENV_BIN / "flask"), "--app", "wsgi", "db", "upgrade"], cwd=ROOT,
                   env=app_env(), check=True, capture_output=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return
        time.sleep(0.1)
    raise RuntimeError(f"nothing listens on {port}")


@contextlib.contextmanager
def gunicorn(app_path: str, workers: int = 2, threads: int = 1, **env: str) -> Iterator[int]:
    """`gunicorn -w N [--threads T] app_path` on a free loopback port; yields the port."""
    port = free_port()
    log = tempfile.NamedTemporaryFile("w+", prefix="bench-gunicorn-", suffix=".log",
                                      delete=False)
    proc = subprocess.Popen(
        [str(VENV_BIN / "gunicorn"), "-w", str(workers), "--threads", str(threads),
         "-b", f"127.0.0.1:{port}",
         "--backlog", "2048", "--log-level", "warning", app_path],
        cwd=ROOT, env=app_env(**env), stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for_port(port)
        time.sleep(0.5)
        yield port
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@dataclass
class Load:
    """What wrk measured."""

    rps: float
    p50_ms: float
    p99_ms: float
    requests: int
    errors: int


_UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60000.0}


def _ms(text: str) -> float:
    number, unit = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text).groups()
    return float(number) * _UNITS[unit]


def wrk(url: str, *, connections: int, seconds: int = 10, script: str | None = None,
        threads: int = 1) -> Load:
    """Drive `url` with wrk from another process; latency percentiles included."""
    args = ["wrk", "-t", str(threads), "-c", str(connections), "-d", f"{seconds}s",
            "--latency", "--timeout", "10s"]
    if script:
        args += ["-s", script]
    out = subprocess.run([*args, url], capture_output=True, text=True, check=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    p50 = _ms(re.search(r"\s50%\s+(\S+)", out).group(1))
    p99 = _ms(re.search(r"\s99%\s+(\S+)", out).group(1))
    requests = int(re.search(r"(\d+) requests in", out).group(1))
    errors = 0
    for pattern in (r"Non-2xx or 3xx responses: (\d+)", r"Socket errors: connect (\d+), "
                    r"read (\d+), write (\d+), timeout (\d+)"):
        match = re.search(pattern, out)
        if match:
            errors += sum(int(g) for g in match.groups())
    return Load(rps, p50, p99, requests, errors)


@dataclass
class Table:
    """A plain-text table printed at the end of a run."""

    title: str
    header: list[str]
    rows: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, *cells: object) -> None:
        self.rows.append([str(c) for c in cells])

    def render(self) -> str:
        widths = [max(len(r[i]) for r in [self.header, *self.rows]) for i in
                  range(len(self.header))]
        line = "  ".join("-" * w for w in widths)
        out = [f"\n## {self.title}", "  ".join(h.ljust(w) for h, w in
                                               zip(self.header, widths, strict=True)), line]
        out += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True))
                for r in self.rows]
        out += [f"  {n}" for n in self.notes]
        return "\n".join(out)


def ratio(value: float, baseline: float) -> str:
    return f"{value / baseline:.2f}x" if baseline else "n/a"


def verdict(met: bool) -> str:
    """How a figure stands against its target, printed beside it."""
    return "met" if met else "MISSED"


@contextlib.contextmanager
def llm_stub() -> Iterator[str]:
    """The instant OpenAI-compatible stub in its own process; yields its base URL."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "bench.llm_stub", str(port)], cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        wait_for_port(port)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        proc.wait(10)


STUB_KEY_ENV = "BENCH_LLM_KEY"


def use_stub_model(cur: Any, base_url: str) -> None:
    """The stub as the only (default) model; jobs read its key from STUB_KEY_ENV."""
    cur.execute("DELETE FROM llm_model")
    cur.execute("UPDATE system_setting SET value = '' "
                "WHERE setting_key = 'memory.extractionModelId'")
    cur.execute("INSERT INTO llm_model (name, model, base_url, api_key_env, is_default) "
                "VALUES ('bench', 'bench-model', %s, %s, 1)", (base_url, STUB_KEY_ENV))


def fresh_capturing_users(cur: Any, user_ids: list[int]) -> None:
    """These users exist with auto-capture on and nothing else: no memories, no outcomes, no
    consolidation cooldown."""
    marks = ", ".join(["%s"] * len(user_ids))
    for table, column in (("memory_item", "user_id"), ("memory_job_outcome", "user_id"),
                          ("memory_consolidation_state", "user_id"),
                          ("user_memory_preference", "user_id"), ("user", "id")):
        cur.execute(f"DELETE FROM `{table}` WHERE `{column}` IN ({marks})", user_ids)
    now = time.strftime("%Y-%m-%d %H:%M:%S")
    cur.executemany("INSERT INTO user (id, is_admin, created_at) VALUES (%s, 0, %s)",
                    [(u, now) for u in user_ids])
    cur.executemany("INSERT INTO user_memory_preference (user_id, auto_capture_enabled, "
                    "created_at, updated_at) VALUES (%s, 1, %s, %s)",
                    [(u, now, now) for u in user_ids])
