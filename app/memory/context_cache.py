"""A cache of users' context blocks that never serves one older than a committed change.

Every new agent session reads its user's block; it changes only when the user's memories do. So
the block is kept per user and project key — in Redis when REDIS_URL is set, in the process
otherwise (the embedded default is one process) — and every change invalidates it through the
unit of work, which brackets each commit that changed a user's memories:

    before the commit: the user's version moves on and a writer is marked in flight;
    after the commit (or its failure): the version moves on again and the mark goes.

A reader keeps what it finds only when its version is the user's current one and no writer is in
flight. One that misses reads the database and stores the block only if, at that moment, the
version is still the one it saw before reading and no writer is in flight (checked and written
atomically): a block read before a commit can never be stored after the bump that commit
made, and a block stored before it carries a version the bump has left behind. A writer that
died with its mark set stops nothing for longer than WRITER_DEADLINE_MS.

A miss answers without waiting for its store: the store is sent once the answer is
(`app.after_response`: the WSGI server closes the body after writing it). A store that comes
late is as harmless as one that comes at once: the script checks the version when it runs, and
a change that committed meanwhile has moved it on (its bump before the commit). So a block
shows up a moment later, never stale. (A sender thread per process did this before; handing
each store to it cost more CPU than the store itself, measured in process.)

Redis unreachable: reads go to the database (and skip Redis for a few seconds instead of
waiting on it each time); a change fails before it commits (503), so no block can outlive a
change unseen. Entries expire after TTL_S whatever happens (memory stays bounded).

Everything goes through redis-py's public API: commands on the client's pool, the two scripts
registered once (`register_script`: EVALSHA, and EVAL again if Redis lost its script cache).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial

import redis
from redis.exceptions import RedisError

from app import after_response
from app.redis_connection import Confirming

TTL_S = 600
WRITER_DEADLINE_MS = 60_000
# After a failed Redis read, this process reads the database without trying Redis for a while.
REDIS_BACKOFF_S = 5.0
LOCAL_MAX_ENTRIES = 10_000

KEY_PREFIX = "memory:{namespace}:context:"


@dataclass(frozen=True)
class Lookup:
    """What a reader found: the block, or the version to store a fresh one under (None: do not
    store, a writer is in flight or the cache cannot be reached)."""

    block: str | None
    version: int | None


def _field(project_key: str | None) -> str:
    return "b:" + (project_key or "")


def _now_ms() -> int:
    return int(time.time() * 1000)


# ---- Redis ----------------------------------------------------------------------------------

# KEYS[1] the user's hash; ARGV: field, version seen before reading, block, ttl.
_STORE = """
local now = redis.call('TIME')
local now_ms = now[1] * 1000 + math.floor(now[2] / 1000)
local state = redis.call('HMGET', KEYS[1], 'v', 'w', 'd')
local writing = tonumber(state[2] or '0') > 0 and tonumber(state[3] or '0') > now_ms
if (state[1] or '0') == ARGV[2] and not writing then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2] .. '|' .. ARGV[3])
  redis.call('EXPIRE', KEYS[1], ARGV[4])
  return 1
end
return 0
"""
# KEYS[1] the user's hash; ARGV: +1 before a commit, -1 after it; deadline ms; ttl.
_BUMP = """
redis.call('HINCRBY', KEYS[1], 'v', 1)
local writers = redis.call('HINCRBY', KEYS[1], 'w', ARGV[1])
if tonumber(ARGV[1]) > 0 then
  redis.call('HSET', KEYS[1], 'd', ARGV[2])
elseif writers < 0 then
  redis.call('HSET', KEYS[1], 'w', 0)
end
redis.call('EXPIRE', KEYS[1], ARGV[3])
return writers
"""


class RedisContextCache:
    def __init__(self, client: redis.Redis, namespace: Callable[[], str], *,
                 confirming: Confirming | None = None) -> None:
        self.redis = client
        # The installation's namespace, asked for when first needed (it may be read from the
        # database) and kept: the keys of two installations on one Redis never meet.
        self._namespace = namespace
        self._prefix: str | None = None
        # With Sentinel the mark before a commit must reach a replica first: a promoted replica
        # without it could hand out a block from before the commit (`redis_connection`).
        self._confirming = confirming
        self._bump = client.register_script(_BUMP)
        self._store = client.register_script(_STORE)
        self._skip_until = 0.0

    def _key(self, user_id: int) -> str:
        if self._prefix is None:
            self._prefix = KEY_PREFIX.format(namespace=self._namespace())
        return f"{self._prefix}{user_id}"

    def _unreachable(self) -> None:
        self._skip_until = time.monotonic() + REDIS_BACKOFF_S

    def lookup(self, user_id: int, project_key: str | None) -> Lookup:
        if time.monotonic() < self._skip_until:
            return Lookup(None, None)
        try:
            version, writers, deadline, entry = self.redis.hmget(
                self._key(user_id), "v", "w", "d", _field(project_key))
        except RedisError:
            self._unreachable()
            return Lookup(None, None)
        current = int(version or 0)
        if int(writers or 0) > 0 and int(deadline or 0) > _now_ms():
            return Lookup(None, None)
        if entry is not None:
            assert isinstance(entry, bytes)  # the client does not decode answers
            stored, _, block = entry.partition(b"|")
            if int(stored) == current:
                return Lookup(block.decode("utf-8"), current)
        return Lookup(None, current)

    def store(self, user_id: int, project_key: str | None, version: int, block: str) -> None:
        """Kept only if the version is still `version` and no writer is in flight (the script
        checks and writes atomically); a store that fails leaves the cache as it was."""
        try:
            self._store(keys=[self._key(user_id)],
                        args=[_field(project_key), version, block, TTL_S])
        except RedisError:
            self._unreachable()

    def offer(self, user_id: int, project_key: str | None, version: int, block: str) -> None:
        """`store`, once the answer being made is sent (`app.after_response`): the reader does
        not wait for Redis a second time."""
        after_response.defer(partial(self.store, user_id, project_key, version, block))

    @contextmanager
    def writing(self, user_ids: Collection[int]) -> Iterator[None]:
        """Around a commit that changes these users' memories. Raises RedisError before the
        commit when Redis cannot be told (the caller's transaction then rolls back).

        The mark after the commit cannot undo the commit when it fails: until it is made,
        readers find the writer's mark and read the database, and stores are refused, which is
        correct, only slower; if it never arrives, the mark ends at its deadline."""
        marked: list[int] = []
        try:
            for user_id in user_ids:
                self._mark(user_id)
                marked.append(user_id)
            yield
        finally:
            try:
                # One EVALSHA per user, as the marks went: a script in a pipeline first asks
                # SCRIPT EXISTS, a round trip more for the one user of nearly every commit.
                for user_id in marked:
                    self._bump(keys=[self._key(user_id)], args=[-1, 0, TTL_S])
            except RedisError:
                self._unreachable()

    def _mark(self, user_id: int) -> None:
        """The version moved on and a writer marked in flight, before a commit."""
        keys, args = [self._key(user_id)], [1, _now_ms() + WRITER_DEADLINE_MS, TTL_S]
        if self._confirming is None:
            self._bump(keys=keys, args=args)
            return
        writer = self._confirming.client()
        self._bump(keys=keys, args=args, client=writer)
        self._confirming.wait_for_replica(writer)

    def invalidate(self, user_id: int) -> None:
        """For a change made outside the unit of work (a fixture, an operator's SQL)."""
        with self.writing([user_id]):
            pass


# ---- in-process (embedded default) ----------------------------------------------------------

class LocalContextCache:
    """The same rules in this process's memory, for the embedded default (one process)."""

    def __init__(self, max_entries: int = LOCAL_MAX_ENTRIES) -> None:
        self._lock = threading.Lock()
        self._versions: dict[int, int] = {}
        self._writers: dict[int, int] = {}
        self._blocks: OrderedDict[tuple[int, str], tuple[int, float, str]] = OrderedDict()
        self._max_entries = max_entries

    def lookup(self, user_id: int, project_key: str | None) -> Lookup:
        with self._lock:
            if self._writers.get(user_id):
                return Lookup(None, None)
            current = self._versions.get(user_id, 0)
            entry = self._blocks.get((user_id, _field(project_key)))
            if entry is not None and entry[0] == current and entry[1] > time.monotonic():
                return Lookup(entry[2], current)
            return Lookup(None, current)

    def store(self, user_id: int, project_key: str | None, version: int, block: str) -> None:
        with self._lock:
            if self._writers.get(user_id) or self._versions.get(user_id, 0) != version:
                return
            key = (user_id, _field(project_key))
            self._blocks[key] = (version, time.monotonic() + TTL_S, block)
            self._blocks.move_to_end(key)
            while len(self._blocks) > self._max_entries:
                self._blocks.popitem(last=False)

    def offer(self, user_id: int, project_key: str | None, version: int, block: str) -> None:
        """`store`: in this process's memory there is no round trip to spare."""
        self.store(user_id, project_key, version, block)

    def _bump(self, user_id: int, writers: int) -> None:
        with self._lock:
            self._versions[user_id] = self._versions.get(user_id, 0) + 1
            self._writers[user_id] = max(self._writers.get(user_id, 0) + writers, 0)

    @contextmanager
    def writing(self, user_ids: Collection[int]) -> Iterator[None]:
        for user_id in user_ids:
            self._bump(user_id, 1)
        try:
            yield
        finally:
            for user_id in user_ids:
                self._bump(user_id, -1)

    def invalidate(self, user_id: int) -> None:
        self._bump(user_id, 0)


ContextCache = RedisContextCache | LocalContextCache
