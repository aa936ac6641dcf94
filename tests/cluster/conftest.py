"""Clustered engines for the tests of this folder, each started once per test run by the
repository's own scripts (`scripts/redis-sentinel.sh`, `scripts/galera-cluster.sh`) on loopback
ports of their own, and stopped at the end. Where the engine's packages are missing the tests
are skipped with the reason (`.ci/run` installs them)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_run(count: int, start: int, stop: int, step: int = 1) -> int:
    """The first port from `start` where `count` ports `step` apart are all free."""
    for base in range(start, stop, 10):
        if all(_free(base + i * step) for i in range(count)):
            return base
    pytest.skip(f"no {count} free ports between {start} and {stop}")


@dataclass
class RedisSentinel:
    """The running set: its script's environment, and the URL the service is given."""

    env: dict[str, str]
    url: str
    master: str = "mymaster"

    def script(self, *args: str) -> str:
        done = subprocess.run([str(ROOT / "scripts" / "redis-sentinel.sh"), *args],
                              env=self.env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    def master_port(self) -> int:
        return int(self.script("status").splitlines()[0].split()[-1])


@pytest.fixture(scope="session")
def redis_sentinel() -> Iterator[RedisSentinel]:
    """A primary, a replica and three Sentinels (`scripts/redis-sentinel.sh`)."""
    if shutil.which("redis-server") is None or shutil.which("redis-cli") is None:
        pytest.skip("redis-server is not installed: the Redis Sentinel tests need it")
    from app.redis_connection import sentinel_url

    port = free_run(2, 6390, 6490)
    sentinel_port = free_run(3, 26390, 26490)
    state = tempfile.mkdtemp(prefix="memory-redis-ha-")
    env = {**os.environ, "REDIS_HA_DIR": state, "REDIS_HA_PORT": str(port),
           "REDIS_HA_SENTINEL_PORT": str(sentinel_port)}
    sentinels = ",".join(f"127.0.0.1:{sentinel_port + i}" for i in range(3))
    ha = RedisSentinel(env, sentinel_url(sentinels, "mymaster", None))
    try:
        ha.script("start")
        yield ha
    finally:
        subprocess.run([str(ROOT / "scripts" / "redis-sentinel.sh"), "stop"], env=env,
                       capture_output=True, timeout=60)
        shutil.rmtree(state, ignore_errors=True)
