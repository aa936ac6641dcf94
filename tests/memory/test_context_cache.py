"""The context cache's rules (`app.memory.context_cache`), on a real Redis and in-process: a block
is served only while it is the user's current one, and a reader can never store a block older
than a change committed while it read."""

from __future__ import annotations

import time

import pytest
import redis

from app.memory.context import cache_client
from app.memory.context_cache import (
    KEY_PREFIX,
    TTL_S,
    LocalContextCache,
    RedisContextCache,
)
from tests.conftest import TEST_REDIS_URL

USER = 7
NAMESPACE = "tests"


def namespace() -> str:
    return NAMESPACE


@pytest.fixture(params=["redis", "local"])
def cache(request, app):
    """`app` flushes the test Redis first."""
    if request.param == "local":
        yield LocalContextCache()
        return
    client = redis.Redis.from_url(TEST_REDIS_URL)
    yield RedisContextCache(client, namespace)
    client.close()


def test_a_stored_block_is_served_until_the_next_change(cache):
    found = cache.lookup(USER, "mao")
    assert found.block is None
    cache.store(USER, "mao", found.version, '{"block": 1}')
    assert cache.lookup(USER, "mao").block == '{"block": 1}'
    with cache.writing([USER]):
        pass
    assert cache.lookup(USER, "mao").block is None


def test_blocks_are_kept_per_project_key_and_user(cache):
    for key, user in ((None, USER), ("mao", USER), ("mao", USER + 1)):
        cache.store(user, key, cache.lookup(user, key).version, f"{user}/{key}")
    assert [cache.lookup(u, k).block for u, k in ((USER, None), (USER, "mao"), (USER + 1, "mao"))] \
        == [f"{USER}/None", f"{USER}/mao", f"{USER + 1}/mao"]


def test_a_block_read_before_a_commit_is_never_stored_after_it(cache):
    """The reader saw version v and read the old rows; a writer committed meanwhile."""
    seen = cache.lookup(USER, None)
    with cache.writing([USER]):
        pass  # the commit
    cache.store(USER, None, seen.version, "old rows")
    assert cache.lookup(USER, None).block is None


def test_a_block_stored_before_a_commit_is_not_served_after_it(cache):
    cache.store(USER, None, cache.lookup(USER, None).version, "old rows")
    with cache.writing([USER]):
        pass
    assert cache.lookup(USER, None).block is None


def test_nothing_is_served_or_stored_while_a_writer_is_in_flight(cache):
    cache.store(USER, None, cache.lookup(USER, None).version, "before")
    with cache.writing([USER]):
        during = cache.lookup(USER, None)
        assert (during.block, during.version) == (None, None)
        cache.store(USER, None, 999, "during")
    after = cache.lookup(USER, None)
    assert after.block is None and after.version is not None


def test_a_failed_commit_still_moves_the_version_on(cache):
    cache.store(USER, None, cache.lookup(USER, None).version, "before")
    with pytest.raises(RuntimeError), cache.writing([USER]):
        raise RuntimeError("the commit failed")
    assert cache.lookup(USER, None).block is None


def test_a_change_of_one_user_leaves_the_others_cached(cache):
    cache.store(USER + 1, None, cache.lookup(USER + 1, None).version, "bob's")
    with cache.writing([USER]):
        pass
    assert cache.lookup(USER + 1, None).block == "bob's"


def test_a_writer_that_died_in_flight_stops_caching_only_until_its_deadline(app):
    client = redis.Redis.from_url(TEST_REDIS_URL)
    cache = RedisContextCache(client, namespace)
    client.hset(f"{KEY_PREFIX.format(namespace=NAMESPACE)}{USER}", mapping={"v": 3, "w": 1,
                                                "d": int(time.time() * 1000) - 1})
    found = cache.lookup(USER, None)
    assert found.version == 3
    cache.store(USER, None, 3, "after the deadline")
    assert cache.lookup(USER, None).block == "after the deadline"
    client.close()


def test_redis_entries_expire(app):
    client = redis.Redis.from_url(TEST_REDIS_URL)
    cache = RedisContextCache(client, namespace)
    cache.store(USER, None, cache.lookup(USER, None).version, "block")
    assert 0 < client.ttl(f"{KEY_PREFIX.format(namespace=NAMESPACE)}{USER}") <= TTL_S
    client.close()


def test_the_in_process_cache_keeps_at_most_its_bound():
    cache = LocalContextCache(max_entries=3)
    for user in range(5):
        cache.store(user, None, cache.lookup(user, None).version, f"block {user}")
    assert [cache.lookup(user, None).block for user in range(5)] == \
        [None, None, "block 2", "block 3", "block 4"]


def test_an_unreachable_redis_is_a_miss_and_no_store():
    cache = RedisContextCache(redis.Redis(port=1, socket_connect_timeout=0.2), namespace)
    found = cache.lookup(USER, None)
    assert (found.block, found.version) == (None, None)


def test_a_change_cannot_commit_while_redis_cannot_be_told():
    cache = RedisContextCache(redis.Redis(port=1, socket_connect_timeout=0.2), namespace)
    with pytest.raises(redis.ConnectionError), cache.writing([USER]):
        pytest.fail("the commit must not run")


# ---- the cache's connections (redis-py's pool) ---------------------------------------------

def test_lookups_and_stores_in_turn_use_one_connection_of_the_pool(app):
    client = cache_client(TEST_REDIS_URL, client_name="context-cache-under-test")
    cache = RedisContextCache(client, namespace)
    for user in range(USER, USER + 50):
        cache.store(user, "mao", cache.lookup(user, "mao").version, f"block {user}")
    # Each lookup read its own reply, never the reply of the store before it.
    assert [cache.lookup(user, "mao").block for user in range(USER, USER + 50)] == \
        [f"block {user}" for user in range(USER, USER + 50)]
    names = [entry["name"] for entry in client.client_list()]
    assert names.count("context-cache-under-test") == 1
    client.close()


def test_a_restarted_redis_costs_no_lookup_a_trip_to_the_database(own_redis):
    """The idle connection died with the server; the next lookup is made on a new one instead
    of counting as Redis being down."""
    cache = RedisContextCache(cache_client(own_redis.url), namespace)
    cache.store(USER, None, cache.lookup(USER, None).version, "block")
    assert cache.lookup(USER, None).block == "block"
    own_redis.stop()
    own_redis.start()
    found = cache.lookup(USER, None)
    assert (found.block, found.version) == (None, 0), "an answer, not a failure"
    cache.store(USER, None, found.version, "again")
    assert cache.lookup(USER, None).block == "again"


def test_a_reply_that_came_too_late_never_answers_a_later_lookup(own_redis):
    """A lookup that timed out leaves its reply on the way: that connection is closed, so the
    reply cannot be read as the answer to another user's lookup."""
    client = redis.Redis.from_url(own_redis.url)
    cache = RedisContextCache(cache_client(own_redis.url, socket_timeout=0.3), namespace)
    for user in (USER, USER + 1):
        cache.store(user, None, cache.lookup(user, None).version, f"block {user}")
    client.client_pause(1000)
    found = cache.lookup(USER, None)
    assert (found.block, found.version) == (None, None), "timed out: a miss, nothing to store"
    client.ping()  # answered once the pause ends, with the paused HMGET, on the closed connection
    cache._skip_until = 0.0  # this process would wait REDIS_BACKOFF_S before trying again
    assert cache.lookup(USER + 1, None).block == f"block {USER + 1}"
    client.close()


def test_a_miss_answers_without_waiting_for_its_store(app, own_redis, memories, monkeypatch):
    """Its store is sent once the answer is (`app.after_response`): a Redis slow to take
    writes delays the block's arrival in the cache, not the read."""
    from app import after_response
    from app.memory import context

    memories.add(USER, "报告用中文")
    client = redis.Redis.from_url(own_redis.url)
    with app.app_context():
        monkeypatch.setitem(app.extensions, context.EXTENSION,
                            RedisContextCache(cache_client(own_redis.url), namespace))
        context.block_json(USER, None)  # the scripts loaded, the connection open
        context.cache().invalidate(USER)
        client.client_pause(1500, all=False)  # writes (the store's script) wait; reads do not
        with after_response.collecting() as pending:
            began = time.monotonic()
            text = context.block_json(USER, None)
            assert time.monotonic() - began < 0.5, "the read waited for its store"
        assert len(pending) == 1 and context.cache().lookup(USER, None).block is None
        for work in pending:  # as the server's close() of the answer runs them
            work()
        assert context.cache().lookup(USER, None).block == text
    client.close()


def test_a_miss_outside_an_answer_stores_at_once(app, own_redis, memories, monkeypatch):
    """A read no answer collects work for (the preview page, a command) stores before it
    returns: nothing is left for a close() that never comes."""
    from app.memory import context

    memories.add(USER, "报告用中文")
    with app.app_context():
        monkeypatch.setitem(app.extensions, context.EXTENSION,
                            RedisContextCache(cache_client(own_redis.url), namespace))
        text = context.block_json(USER, None)
        assert context.cache().lookup(USER, None).block == text


def _calls(client: redis.Redis, command: str) -> int:
    return int(client.info("commandstats").get(f"cmdstat_{command}", {}).get("calls", 0))


def test_a_store_is_one_evalsha_without_asking_for_its_script(own_redis):
    """EVALSHA of the script registered at start, and nothing else (no SCRIPT EXISTS, which a
    script run in a pipeline asks first). On a Redis of its own: the counts are the server's."""
    client = redis.Redis.from_url(own_redis.url)
    cache = RedisContextCache(client, namespace)
    cache.store(USER + 3, None, 0, "the script loaded")
    version = cache.lookup(USER, None).version
    asked, sent = _calls(client, "script|exists"), _calls(client, "evalsha")
    cache.store(USER, None, version, "stored")
    assert (_calls(client, "script|exists") - asked, _calls(client, "evalsha") - sent) == (0, 1)
    assert cache.lookup(USER, None).block == "stored"
    client.close()


def test_a_store_after_redis_lost_its_scripts_loads_it_again(own_redis):
    client = redis.Redis.from_url(own_redis.url)
    cache = RedisContextCache(client, namespace)
    cache.store(USER + 3, None, 0, "the script loaded")
    client.script_flush()
    cache.store(USER, None, cache.lookup(USER, None).version, "after the flush")
    assert cache.lookup(USER, None).block == "after the flush"
    client.close()


def test_a_commit_for_one_user_is_two_evalsha_without_asking_for_the_script(own_redis):
    """The mark before the commit and its end after it: one EVALSHA each, no SCRIPT EXISTS (a
    script run in a pipeline asks for it first: a round trip more for every job and edit)."""
    client = redis.Redis.from_url(own_redis.url)
    cache = RedisContextCache(client, namespace)
    with cache.writing([USER + 3]):
        pass  # loads the script
    asked, sent = _calls(client, "script|exists"), _calls(client, "evalsha")
    with cache.writing([USER]):
        pass
    assert (_calls(client, "script|exists") - asked, _calls(client, "evalsha") - sent) == (0, 2)
    client.close()


def test_a_commit_after_redis_lost_its_scripts_ends_its_mark(own_redis):
    client = redis.Redis.from_url(own_redis.url)
    cache = RedisContextCache(client, namespace)
    seen = cache.lookup(USER, None)
    with cache.writing([USER]):
        client.script_flush()
    found = cache.lookup(USER, None)
    assert (found.block, found.version) == (None, seen.version + 2)  # moved on, mark gone
    cache.store(USER, None, found.version, "stored after the flush")
    assert cache.lookup(USER, None).block == "stored after the flush"
    client.close()


def test_a_commit_for_several_users_ends_each_ones_mark(cache):
    users = [USER, USER + 1, USER + 2]
    seen = [cache.lookup(user, None).version for user in users]
    with cache.writing(users):
        assert all(cache.lookup(user, None).version is None for user in users)
    after = [cache.lookup(user, None) for user in users]
    assert [found.version for found in after] == [version + 2 for version in seen]
    for user, found in zip(users, after, strict=True):
        cache.store(user, None, found.version, f"block of {user}")
    assert [cache.lookup(user, None).block for user in users] == [
        f"block of {user}" for user in users]
