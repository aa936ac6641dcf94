"""Every Redis client of the service is made here: one Redis (`redis://…`), or the master a set
of Sentinels names (`redis+sentinel://host:port,host:port/master[/db]`, which `config` builds
from REDIS_SENTINELS and REDIS_SENTINEL_MASTER).

With Sentinel, redis-py's `Sentinel.master_for` asks the Sentinels where the master is at each
new connection, and a connection to a master that was demoted fails (Sentinel kills its
clients; a write gets READONLY), so the next one goes to the promoted replica.

Replication is asynchronous: a write the master acknowledged may be missing on the replica that
replaces it. Two writes must not be lost that way, and with Sentinel they are made through
`Confirming`, which waits (`WAIT 1`) until a replica holds them before the caller goes on to
commit:

- an enqueued job (the webhook answers 202 only after it), so a failover never loses the job of
  an accepted delivery;
- the context cache's version bump made before a commit changes a user's memories, so a
  promoted replica always has every committed change's bump and can never hand out a block
  stored before it. (The bump after the commit, a block stored, a throttle count, may be lost:
  the first only makes readers go to the database until the writer's deadline, the others
  are rebuilt or only count a little less.)

When no replica confirms in time and one is connected (it could be promoted without the write),
the write fails (`ReplicaNotConfirmed`, a RedisError: the caller's transaction rolls back, the
request answers 503). With no replica connected there is nothing to promote, and the write
stands; a replica that reconnects copies the master first.

No replica is connected right after a failover, until the old master returns as a replica (or
a new one is attached): `WAIT 1` would then wait its whole timeout after every write, for
nothing. So a process asks the master how many replicas it has (`ROLE`, one round trip) at most
once a second and waits only while it has one; a write made while it has none stands
unconfirmed and is counted (`memory_redis_unconfirmed_writes_total`, alerted on in
docs/prometheus-alerts.yml). The second a replica needs to be counted again costs nothing in
safety: it attached by copying the master (every earlier write included), and Sentinel does not
promote a replica that is still copying.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

import redis
from limits.storage import RedisSentinelStorage, Storage, storage_from_string
from redis.driver_info import DriverInfo
from redis.exceptions import RedisError
from redis.sentinel import Sentinel

from app import metrics

SENTINEL_SCHEME = "redis+sentinel"
DEFAULT_MASTER = "mymaster"
# How long a confirmed write waits for a replica. A replica on the same network acknowledges
# within a millisecond or two; this bounds what a lagging one costs each write.
CONFIRM_TIMEOUT_MS = 500
# How long a process trusts its last count of the master's replicas (module docstring).
REPLICA_COUNT_TTL_S = 1.0
# What every connection tells Redis of its library (CLIENT SETINFO), worked out once: left to
# redis-py, each new connection looks its version up in the installed packages' metadata
# (importlib.metadata), and a forked work horse makes three new connections per job (~2 ms of
# a forked extraction's 36, `bench.run worker`).
DRIVER_INFO = DriverInfo()


class ReplicaNotConfirmed(RedisError):
    """A connected replica did not acknowledge a write in time: a failover now could lose it."""


@dataclass(frozen=True)
class SentinelAddress:
    """What a `redis+sentinel://` URL names."""

    sentinels: tuple[tuple[str, int], ...]
    master: str
    db: int = 0
    password: str | None = None

    @classmethod
    def parse(cls, url: str) -> SentinelAddress:
        parts = urlsplit(url)
        hosts = parts.netloc.rpartition("@")[2]
        sentinels = []
        for hostport in hosts.split(","):
            host, _, port = hostport.strip().rpartition(":")
            sentinels.append((host or "127.0.0.1", int(port or 26379)))
        path = [piece for piece in parts.path.split("/") if piece]
        password = unquote(parts.password) if parts.password else None
        return cls(tuple(sentinels), path[0] if path else DEFAULT_MASTER,
                   int(path[1]) if len(path) > 1 else 0, password)

    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        hosts = ",".join(f"{host}:{port}" for host, port in self.sentinels)
        return f"{SENTINEL_SCHEME}://{auth}{hosts}/{self.master}/{self.db}"


def sentinel_url(sentinels: str, master: str | None, base_url: str | None) -> str:
    """The URL for REDIS_SENTINELS (`host:port,host:port`) and REDIS_SENTINEL_MASTER; the
    database number and password come from REDIS_URL when it is set too."""
    base = urlsplit(base_url or "")
    path = [piece for piece in base.path.split("/") if piece]
    addresses = []
    for hostport in sentinels.split(","):
        if hostport.strip():
            host, _, port = hostport.strip().rpartition(":")
            addresses.append((host or "127.0.0.1", int(port or 26379)))
    if not addresses:
        raise ValueError("REDIS_SENTINELS names no host:port")
    return SentinelAddress(tuple(addresses), master or DEFAULT_MASTER,
                           int(path[0]) if path else 0,
                           unquote(base.password) if base.password else None).url()


def is_sentinel(url: str) -> bool:
    return url.startswith(SENTINEL_SCHEME + "://")


class Confirming:
    """Writes that must reach a replica before the caller commits (module docstring), made on
    redis-py's public API: each thread has a client of its own whose pool holds one connection,
    so a write — a pipeline RQ turns into MULTI/EXEC included — and the `WAIT 1` after it go
    over the same connection, which is what WAIT counts."""

    def __init__(self, url: str, **socket_options: Any) -> None:
        self.url = url
        self.socket_options = socket_options
        self._local = threading.local()
        # (when, how many): the master's connected replicas as ROLE last said, for every thread.
        self._replicas: tuple[float, int] = (float("-inf"), 0)

    def client(self) -> redis.Redis:
        """This thread's one-connection client."""
        found = getattr(self._local, "client", None)
        if found is None:
            found = client(self.url, max_connections=1, **self.socket_options)
            self._local.client = found
        return found

    def wait_for_replica(self, written_by: redis.Redis) -> None:
        """Return once a replica holds what `written_by` wrote; raise ReplicaNotConfirmed when
        none did in time while one is connected (it could be promoted without the writes).
        While the master has no replica the write stands unconfirmed, without a WAIT."""
        at, replicas = self._replicas
        if time.monotonic() - at > REPLICA_COUNT_TTL_S:
            replicas = self._count_replicas(written_by)
        if replicas and int(written_by.wait(1, CONFIRM_TIMEOUT_MS)) >= 1:
            return
        if replicas and self._count_replicas(written_by):
            raise ReplicaNotConfirmed(
                f"no replica confirmed a write within {CONFIRM_TIMEOUT_MS} ms")
        metrics.REDIS_UNCONFIRMED_WRITES.inc()

    def _count_replicas(self, master: redis.Redis) -> int:
        replicas = len(master.role()[2])
        self._replicas = (time.monotonic(), replicas)
        return replicas


def client(url: str, **socket_options: Any) -> redis.Redis:
    """A client of the Redis `url` names (the master, for a Sentinel URL)."""
    options = {"driver_info": DRIVER_INFO, **socket_options}
    if not is_sentinel(url):
        return redis.Redis.from_url(url, **options)
    address = SentinelAddress.parse(url)
    timeouts = {"socket_timeout": socket_options.get("socket_timeout", 2),
                "socket_connect_timeout": socket_options.get("socket_connect_timeout", 2)}
    # The Sentinels' own connections take the timeouts (as redis-py's default would) and the
    # driver's name; the master's take the timeouts unless `socket_options` says otherwise.
    sentinel = Sentinel(list(address.sentinels),
                        sentinel_kwargs={**timeouts, "driver_info": DRIVER_INFO}, **timeouts)
    return sentinel.master_for(address.master, db=address.db, password=address.password,
                               **options)


def rate_limit_storage(url: str | None) -> Storage:
    """The `limits` storage for counts every web process shares: `limits`' own Sentinel
    storage, reading from the master too (a replica's counts lag behind the failures just
    counted), or its Redis storage, or this process's memory without Redis."""
    if url is None:
        return storage_from_string("memory://")
    if not is_sentinel(url):
        return storage_from_string(url)
    address = SentinelAddress.parse(url)
    hosts = ",".join(f"{host}:{port}" for host, port in address.sentinels)
    return RedisSentinelStorage(f"{SENTINEL_SCHEME}://{hosts}/{address.master}",
                                use_replicas=False, db=address.db,
                                **({"password": address.password} if address.password else {}))
