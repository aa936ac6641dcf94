"""Every Redis client of the service packs its commands and parses its replies with hiredis
(`redis[hiredis]`): RQ's bookkeeping and the hot paths' commands cost C, not Python."""

from __future__ import annotations

import importlib.metadata

from redis._parsers import _HiredisParser
from redis.connection import HiredisRespSerializer

from app import redis_connection
from tests.conftest import TEST_REDIS_URL


def test_redis_commands_are_packed_and_replies_parsed_by_hiredis():
    client = redis_connection.client(TEST_REDIS_URL)
    try:
        assert client.ping()
        connection = client.connection_pool.get_connection()
        try:
            assert isinstance(connection._parser, _HiredisParser)
            assert isinstance(connection._command_packer, HiredisRespSerializer)
        finally:
            client.connection_pool.release(connection)
    finally:
        client.close()



def test_a_new_connection_names_its_library_without_reading_package_metadata(monkeypatch):
    """Each connection still tells Redis its library and version (CLIENT SETINFO), from what
    was worked out once: a forked work horse opens three per job, and redis-py would read the
    installed packages' metadata for each."""
    looked_up: list[str] = []
    real_version = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version",
                        lambda name: looked_up.append(name) or real_version(name))
    client = redis_connection.client(TEST_REDIS_URL)
    try:
        assert client.ping()
        connection = client.connection_pool.get_connection()
        driver = connection.driver_info
        client.connection_pool.release(connection)
    finally:
        client.close()
    assert looked_up == []
    assert (driver.formatted_name, driver.lib_version) == ("redis-py", real_version("redis"))


def test_the_sentinels_connections_are_named_once_too():
    client = redis_connection.client("redis+sentinel://127.0.0.1:1,127.0.0.1:2/mymaster")
    sentinel = client.connection_pool.sentinel_manager
    assert sentinel.sentinel_kwargs["driver_info"] is redis_connection.DRIVER_INFO
    assert all(s.connection_pool.connection_kwargs["driver_info"] is redis_connection.DRIVER_INFO
               for s in sentinel.sentinels)
    assert client.connection_pool.connection_kwargs["driver_info"] is redis_connection.DRIVER_INFO
    assert client.connection_pool.connection_kwargs["socket_timeout"] == 2
