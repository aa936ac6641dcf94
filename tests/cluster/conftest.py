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
from urllib.parse import urlsplit

import pytest
import redis
import sqlalchemy as sa

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
    url: str = ""
    master: str = "mymaster"
    password: str = ""

    def script(self, *args: str) -> str:
        done = subprocess.run([str(ROOT / "scripts" / "redis-sentinel.sh"), *args],
                              env=self.env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    def master_port(self) -> int:
        return int(self.script("status").splitlines()[0].split()[-1])

    def redis(self, port: int) -> redis.Redis:
        """A client of one Redis of the set (not through the Sentinels)."""
        return redis.Redis(host="127.0.0.1", port=port, password=self.password)


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
    ha = RedisSentinel(env)
    try:
        settings = dict(line.split("=", 1) for line in ha.script("start").splitlines()
                        if "=" in line)
        ha.url = sentinel_url(settings["REDIS_SENTINELS"], settings["REDIS_SENTINEL_MASTER"],
                              settings["REDIS_URL"])
        ha.password = urlsplit(settings["REDIS_URL"]).password or ""
        yield ha
    finally:
        subprocess.run([str(ROOT / "scripts" / "redis-sentinel.sh"), "stop"], env=env,
                       capture_output=True, timeout=60)
        shutil.rmtree(state, ignore_errors=True)


GALERA_PROVIDER = Path("/usr/lib/galera/libgalera_smm.so")
GALERA_TOOLS = ("mariadbd", "mariadb-install-db", "mariadb", "mariadb-backup", "haproxy", "socat",
                "openssl")


@dataclass
class GaleraCluster:
    """Three MariaDB Galera nodes behind HAProxy (`scripts/galera-cluster.sh`), with the root
    password and CA the script made for them."""

    env: dict[str, str]
    proxy_port: int
    node_ports: tuple[int, int, int]
    database: str = "memory_test"
    password: str = ""
    ca: str = ""

    def script(self, *args: str, timeout_s: float = 300) -> str:
        done = subprocess.run([str(ROOT / "scripts" / "galera-cluster.sh"), *args],
                              env=self.env, capture_output=True, text=True, timeout=timeout_s)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout.strip()

    def url(self, node: int | None = None) -> str:
        """Through HAProxy, or straight to node 1–3; as root, over TLS."""
        port = self.proxy_port if node is None else self.node_ports[node - 1]
        return (f"mysql+pymysql://root:{self.password}@127.0.0.1:{port}/{self.database}"
                f"?charset=utf8mb4&ssl_ca={self.ca}")

    def node_log(self, node: int) -> str:
        return Path(self.env["GALERA_DIR"], f"node{node}", "error.log").read_text(
            errors="replace")


def _which(tool: str) -> bool:
    return shutil.which(tool) is not None or Path("/usr/sbin", tool).exists()


@pytest.fixture(scope="session")
def galera() -> Iterator[GaleraCluster]:
    """Started once per test run: node 1 bootstraps, 2 and 3 join by SST, then HAProxy."""
    missing = [tool for tool in GALERA_TOOLS if not _which(tool)]
    if not GALERA_PROVIDER.exists():
        missing.append(str(GALERA_PROVIDER))
    if missing:
        pytest.skip("the Galera tests need the packages galera-4, mariadb-server, mariadb-backup, "
                    f"haproxy, socat and openssl (missing: {', '.join(missing)})")
    node = free_run(3, 3307, 3400)
    proxy = free_run(1, node + 3, 3500)
    base = next((b for b in range(14557, 15557, 100)
                 if all(_free(b + 10 * n + i) for n in (1, 2, 3) for i in (0, 1, 2))), None)
    if base is None:
        pytest.skip("no free ports for Galera's group communication")
    state = tempfile.mkdtemp(prefix="memory-galera-")
    env = {**os.environ, "GALERA_DIR": state, "GALERA_PORT": str(node),
           "GALERA_PROXY_PORT": str(proxy), "GALERA_BASE_PORT": str(base)}
    cluster = GaleraCluster(env, proxy, (node, node + 1, node + 2))
    try:
        printed = cluster.script("start").splitlines()[-1]
        url = sa.engine.make_url(printed.removeprefix("DATABASE_URL="))
        cluster.password, cluster.ca = url.password, url.query["ssl_ca"]
        yield cluster
    finally:
        subprocess.run([str(ROOT / "scripts" / "galera-cluster.sh"), "stop"], env=env,
                       capture_output=True, timeout=300)
        shutil.rmtree(state, ignore_errors=True)
