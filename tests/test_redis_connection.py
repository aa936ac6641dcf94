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


def test_a_new_connection_costs_no_client_setinfo_round_trips():
    """A work horse opens its Redis connections anew for every job: none spends two round
    trips telling Redis the library's name and version (redis-py sends `CLIENT SETINFO` on
    connect unless its `driver_info` is None; Redis before 7.2 answers both with an error)."""
    client = redis_connection.client(TEST_REDIS_URL)
    try:
        connection = client.connection_pool.get_connection()
        try:
            assert connection.driver_info is None
        finally:
            client.connection_pool.release(connection)
    finally:
        client.close()
