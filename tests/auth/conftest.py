"""What the login-throttle tests share: a clock they move themselves, and cheap password hashes,
so a test of a time window never depends on how long scrypt takes on a busy machine."""

from __future__ import annotations

import time

import limits.storage.redis
import pytest

from app.auth import service, throttle
from tests.page_support import _cheap_password_hash, speed_up


class Clock:
    """`time.time()` as the throttle and its storage read it, moved only by the test."""

    def __init__(self) -> None:
        # Whole seconds: Redis keeps the timestamps as Lua numbers, printed to 14 digits.
        self.now = float(int(time.time()))

    def time(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock(app, monkeypatch: pytest.MonkeyPatch) -> Clock:
    """The throttle's moving window (its timestamps are taken client-side by `limits`, then
    kept in Redis) and its Retry-After, on a clock the test controls; logins hash cheaply."""
    fake = Clock()
    monkeypatch.setattr(limits.storage.redis, "time", fake)
    monkeypatch.setattr(throttle, "time", fake)
    speed_up(app, monkeypatch)
    monkeypatch.setattr(service, "_dummy_hash", _cheap_password_hash)
    return fake
