"""Login throttling (SPEC §8 Login and sessions), on `limits` — the storage and moving-window
engine of Flask-Limiter.

Failed logins are counted, per username and per client address, in a moving window of 15
minutes; once a username has 5, every attempt for it answers 429 whatever the password, until
its oldest failure leaves the window. The per-address limit allows more failures (20), so it
stops one address trying many usernames without locking a shared office out first.

The counts live in Redis when REDIS_URL is set, so every web process sees the same ones. Without
Redis the service is one process (the embedded setup runs its jobs on a thread of it), so the
process's memory is the store every request shares.

Flask-Limiter's extension itself is not used: it counts requests, not failures, and its
app-wide before/after/teardown hooks would run on every request, the platform's hot paths
included.
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass

from flask import Flask, current_app
from limits import RateLimitItemPerMinute
from limits.strategies import MovingWindowRateLimiter

from app import redis_connection

USERNAME_FAILURES = RateLimitItemPerMinute(5, 15)
ADDRESS_FAILURES = RateLimitItemPerMinute(20, 15)
EXTENSION = "login_throttle"


@dataclass(frozen=True)
class Throttle:
    limiter: MovingWindowRateLimiter

    def _keys(self, username: str, address: str) -> tuple[tuple, tuple]:
        # Usernames compare case-insensitively on MySQL, so their counts do too; hashed, so a
        # huge or odd username makes an ordinary key.
        name = hashlib.sha256(username.strip().casefold().encode("utf-8")).hexdigest()
        return (USERNAME_FAILURES, "login-user", name), (ADDRESS_FAILURES, "login-addr", address)

    def retry_after(self, username: str, address: str) -> int | None:
        """Seconds until an attempt for `username` from `address` may be made, or None when it
        may be made now."""
        waits = []
        for item, *key in self._keys(username, address):
            if not self.limiter.test(item, *key):
                reset_at, _ = self.limiter.get_window_stats(item, *key)
                waits.append(max(1, math.ceil(reset_at - time.time())))
        return max(waits) if waits else None

    def failed(self, username: str, address: str) -> None:
        for item, *key in self._keys(username, address):
            self.limiter.hit(item, *key)


def init_app(app: Flask) -> None:
    storage = redis_connection.rate_limit_storage(app.config.get("REDIS_URL"))
    app.extensions[EXTENSION] = Throttle(MovingWindowRateLimiter(storage))


def throttle() -> Throttle:
    return current_app.extensions[EXTENSION]
