"""The memory block a new agent session starts with (seed §5.2, SPEC §4 context), for the platform
and for the user's own preview — the same code, the same bytes.

Served from the context cache (`context_cache`) when it holds the user's current block, else built
from the two injection reads and offered to the cache. What is cached is the JSON text of
`{memories, prompt}` as the envelope carries it, so a hit costs no encoding either.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

import redis
from flask import Flask, current_app
from redis.backoff import NoBackoff
from redis.retry import Retry

from app import redis_connection
from app.memory import repository, rules
from app.memory.context_cache import ContextCache, LocalContextCache, RedisContextCache
from app.memory.events import Event
from app.memory.rules import Scope
from app.system import installation

EXTENSION = "context_cache"


def cache_client(url: str, **options: Any) -> redis.Redis:
    """The cache's Redis client. Short timeouts and one immediate retry (a connection Redis
    dropped on a restart): a reader that cannot reach Redis goes to the database instead of
    waiting."""
    return redis_connection.client(url, **{
        "socket_connect_timeout": 1, "socket_timeout": 2, "retry": Retry(NoBackoff(), 1),
        **options})


def init_app(app: Flask) -> None:
    url = app.config.get("REDIS_URL")
    app.extensions[EXTENSION] = (
        RedisContextCache(cache_client(url), app.extensions[installation.EXTENSION].namespace_of,
                          confirming=redis_connection.Confirming(
            url, socket_connect_timeout=1, socket_timeout=2)
            if redis_connection.is_sentinel(url) else None)
        if url else LocalContextCache())


def cache() -> ContextCache:
    found: ContextCache = current_app.extensions[EXTENSION]
    return found


def around_commit(events: Sequence[Event]) -> AbstractContextManager[None]:
    """The unit of work's commit hook: readers of the context blocks of the users these events
    changed go to the database until the commit is done."""
    return cache().writing({event.user_id for event in events})


def build(user_id: int, project_key: str | None) -> dict[str, Any]:
    """PROJECT lines (valid key only) then USER lines, each newest first, 12 + 8, and the exact
    prompt block."""
    memories = [
        {"scope": scope, "projectKey": pk if scope == Scope.PROJECT else None, "content": content}
        for scope, pk, content in repository.injection_rows(user_id, project_key)
    ]
    lines = [rules.prompt_line(m["scope"], m["projectKey"], m["content"]) for m in memories]
    return {"memories": memories, "prompt": rules.prompt_block(lines)}


def block_json(user_id: int, project_key: str | None) -> str:
    """The JSON text of the block for this user and (valid) project key, never older than a
    committed change of the user's memories."""
    found = cache().lookup(user_id, project_key)
    if found.block is not None:
        return found.block
    text = current_app.json.dumps(build(user_id, project_key))
    if found.version is not None:
        # Sent once the answer is (`app.after_response`): harmless however late it lands.
        cache().offer(user_id, project_key, found.version, text)
    return text
