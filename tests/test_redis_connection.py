"""Every Redis client of the service packs its commands and parses its replies with hiredis
(`redis[hiredis]`): RQ's bookkeeping and the hot paths' commands cost C, not Python."""

from __future__ import annotations

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

