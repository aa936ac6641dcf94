"""A redis-server process of a test's own, on a free port, stopped and restarted at will (never
the shared one)."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import redis


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class RedisServer:
    """A redis-server process of this test's own, without persistence."""

    def __init__(self, directory: Path) -> None:
        self.port = _free_port()
        self.directory = directory
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        with (self.directory / "redis.log").open("a") as log:
            self.process = subprocess.Popen(
                ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
                 "--save", "", "--appendonly", "no", "--dir", str(self.directory)],
                stdout=log, stderr=subprocess.STDOUT)
        client = redis.Redis.from_url(self.url)
        answers = self._answers(client)
        deadline = time.monotonic() + 10
        try:
            while not answers():
                assert time.monotonic() < deadline, "the test's redis-server did not start"
                time.sleep(0.05)
        finally:
            client.close()

    @staticmethod
    def _answers(client: redis.Redis):
        def ping() -> bool:
            try:
                return bool(client.ping())
            except redis.ConnectionError:
                return False
        return ping

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)
        self.process = None
