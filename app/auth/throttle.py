"""Login throttling (SPEC §8 Login and sessions, §9 Accounts), on `limits` — the storage and
moving-window engine of Flask-Limiter.

Failed logins are counted per account and per client address, in a moving window of 15
minutes; once an account has 5, every attempt for it answers 429 whatever the password, until
its oldest failure leaves the window. A successful login clears its account's count. The
per-address limit allows more failures (20), so it stops one address trying many usernames
without locking a shared office out first.

An account is what the database matches the typed name to: MariaDB's utf8mb4_unicode_ci logs
`ｃａｒｏｌ`, `càrol` and `Carol` in as `carol`, so each of them counts against carol's id — a
count per typed string would give every spelling its own five guesses. A name that matches no
account is counted by its case-folded text (nothing to guess there, but it must answer as an
existing one would). The client address is `request.remote_addr`, which `ProxyFix` sets from
`X-Forwarded-For` when MEMORY_TRUSTED_PROXIES says how many proxies to trust (`app.proxies`).

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
from app.system import installation as installations
from app.system.installation import Installation

ACCOUNT_FAILURES = RateLimitItemPerMinute(5, 15)
ADDRESS_FAILURES = RateLimitItemPerMinute(20, 15)
EXTENSION = "login_throttle"


def account_key(username: str, user_id: int | None) -> str:
    """What failures of a login for `username` count against: the account the database matched
    the name to (its id), else the typed name case-folded (hashed, so a huge or odd name makes
    an ordinary key)."""
    if user_id is not None:
        return f"id:{user_id}"
    return "name:" + hashlib.sha256(username.strip().casefold().encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Throttle:
    limiter: MovingWindowRateLimiter
    installation: Installation  # its namespace is part of every key

    def _keys(self, account: str, address: str) -> tuple[tuple, tuple]:
        namespace = self.installation.namespace
        return (ACCOUNT_FAILURES, "login-account", namespace, account), \
            (ADDRESS_FAILURES, "login-addr", namespace, address)

    def retry_after(self, account: str, address: str) -> int | None:
        """Seconds until an attempt for `account` from `address` may be made, or None when it
        may be made now."""
        waits = []
        for item, *key in self._keys(account, address):
            if not self.limiter.test(item, *key):
                reset_at, _ = self.limiter.get_window_stats(item, *key)
                waits.append(max(1, math.ceil(reset_at - time.time())))
        return max(waits) if waits else None

    def failed(self, account: str, address: str) -> None:
        for item, *key in self._keys(account, address):
            self.limiter.hit(item, *key)

    def succeeded(self, account: str) -> None:
        """The right password clears the account's failures: a user who mistyped four times
        and then logged in starts afresh. The address keeps its count (it may be guessing at
        other accounts)."""
        self.limiter.clear(ACCOUNT_FAILURES, "login-account", self.installation.namespace,
                           account)


def init_app(app: Flask) -> None:
    storage = redis_connection.rate_limit_storage(app.config.get("REDIS_URL"))
    app.extensions[EXTENSION] = Throttle(MovingWindowRateLimiter(storage),
                                         app.extensions[installations.EXTENSION])


def throttle() -> Throttle:
    return current_app.extensions[EXTENSION]
