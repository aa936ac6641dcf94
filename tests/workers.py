"""Real `flask --app wsgi worker` processes on the test database and Redis (started from a fork
server: `tests.forked_commands`)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import redis
from rq import Worker

from tests import forked_commands
from tests.conftest import TEST_DATABASE_URL, TEST_REDIS_URL, WEBHOOK_SECRET

ROOT = Path(__file__).resolve().parent.parent


def worker_env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "DATABASE_URL": TEST_DATABASE_URL, "REDIS_URL": TEST_REDIS_URL,
           "MEMORY_WEBHOOK_SECRET": WEBHOOK_SECRET, "MEMORY_LLM_TIMEOUT_S": "5",
           "MEMORY_RETRY_DELAYS_S": "1", "PYTHONUNBUFFERED": "1"}
    env.update(extra)
    return env


@contextlib.contextmanager
def worker_processes(count: int, log_dir: Path, *, burst: bool = False, fork: bool = True,
                     **env: str) -> Iterator[list[forked_commands.ForkedCommand]]:
    """Start `count` workers (logs in log_dir); on exit stop them (SIGTERM, then SIGKILL)."""
    command = ["--app", "wsgi", "worker"]
    if burst:
        command.append("--burst")
    if not fork:
        command.append("--no-fork")
    started: list[forked_commands.ForkedCommand] = []
    try:
        for i in range(count):
            started.append(forked_commands.start(command, env=worker_env(**env), cwd=ROOT,
                                                 output=log_dir / f"worker-{i}.log"))
        yield started
    finally:
        for process in started:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in started:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@contextlib.contextmanager
def _registered() -> Iterator[list[Worker]]:
    """The workers registered on this test's Redis db (the tests' own), on a connection open
    while they are read."""
    connection = redis.Redis.from_url(TEST_REDIS_URL)
    try:
        yield Worker.all(connection=connection)
    finally:
        connection.close()


def registered_workers() -> int:
    with _registered() as workers:
        return len(workers)


def worker_states() -> list[str]:
    """The state of each registered worker ("started", "idle", "busy", …)."""
    with _registered() as workers:
        return [worker.get_state() for worker in workers]


def wait_until(condition: Callable[[], object], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def work_horse_of(worker_pid: int) -> int | None:
    """The child a worker forked for its current job: RQ puts it in its own process group."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid, parent, group = int(stat.parent.name), int(fields[1]), int(fields[2])
        if parent == worker_pid and group == pid:
            return pid
    return None
