"""Fixtures of the reliability and security suite: the people who call the service, each with
every credential they own, signed webhook deliveries, and a snapshot of what the service stores.

Every test builds its state through the shared `app` fixture (its own MariaDB database and Redis
db from TEST_DATABASE_URL / TEST_REDIS_URL), so nothing here touches another engineer's data.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from app.platform.webhook import signature
from tests.conftest import PASSWORD, SERVICE_TOKEN, WEBHOOK_SECRET, Accounts
from tests.page_support import speed_up

WEBHOOK_PATH = "/api/v1/webhooks/task-completed"
EXTRACTION_MODEL_KEY = "memory.extractionModelId"
_CSRF_META = re.compile(r'<meta name="csrf-token" content="([^"]+)">')


def csrf_from(html: str) -> str:
    match = _CSRF_META.search(html)
    assert match, "the page carries no csrf-token meta"
    return match.group(1)


@dataclass
class Person:
    """Someone with an account: a personal token and a logged-in browser (cookie + CSRF token).

    `client` carries the session cookie; `api_headers` the personal token. The service token
    "person" has neither a cookie nor a token of its own: it acts for `acts_for`.
    """

    name: str
    user_id: int | None
    client: FlaskClient
    api_headers: dict[str, str] = field(default_factory=dict)
    csrf: str = ""

    def open(self, method: str, path: str, *, csrf: bool = True, **kwargs: Any) -> TestResponse:
        """A request with every credential this person holds (the CSRF header on every method,
        as htmx sends it from <body hx-headers>)."""
        headers = {**self.api_headers, **kwargs.pop("headers", {})}
        if csrf and self.csrf:
            headers.setdefault("X-CSRF-Token", self.csrf)
        return self.client.open(path, method=method, headers=headers, **kwargs)

    @property
    def session_cookie(self) -> str:
        cookie = self.client.get_cookie("session")
        assert cookie is not None, f"{self.name} is not logged in"
        return cookie.value


def log_in(client: FlaskClient, username: str) -> str:
    """Log in through the form; returns the CSRF token of the new session."""
    token = csrf_from(client.get("/login").text)
    response = client.post("/login", data={"username": username, "password": PASSWORD,
                                           "csrf_token": token})
    assert response.status_code == 302, response.text
    # Login starts a new session, so the token comes from a page rendered after it.
    return csrf_from(client.get("/login").text)


@dataclass
class People:
    anonymous: Person
    owner: Person
    other: Person
    auditor: Person
    admin: Person
    service: Person

    def all(self) -> dict[str, Person]:
        return {"anonymous": self.anonymous, "owner": self.owner, "other": self.other,
                "auditor": self.auditor, "admin": self.admin, "service": self.service}


@pytest.fixture
def fast_logins(app: Flask, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests that log in several people: a cheap (still real) password hash."""
    speed_up(app, monkeypatch)


@pytest.fixture
def people(app: Flask, fast_logins: None, users: Accounts) -> People:
    """alice (the owner of the memories under test), bob (another user), audrey (an auditor:
    memory:read only), root (an admin), the platform's service token acting for alice, and
    someone with no credentials at all."""
    def person(name: str, **options: Any) -> Person:
        user_id = users.user(name, **options)
        client = app.test_client()
        return Person(name, user_id, client,
                      {"Authorization": f"Bearer {users.token(name)}"}, log_in(client, name))

    owner = person("alice")
    return People(
        anonymous=Person("anonymous", None, app.test_client()),
        owner=owner,
        other=person("bob"),
        auditor=person("audrey", grants=("memory:read",)),
        admin=person("root", admin=True),
        service=Person("service", owner.user_id, app.test_client(),
                       {"Authorization": f"Bearer {SERVICE_TOKEN}",
                        "X-User-Id": str(owner.user_id)}),
    )


def signed(raw: bytes, timestamp: int | None = None,
           secret: str = WEBHOOK_SECRET) -> dict[str, str]:
    """The webhook's signature headers for `raw`, stamped now unless told otherwise."""
    stamp = str(int(time.time()) if timestamp is None else timestamp)
    return {"X-Memory-Timestamp": stamp, "X-Memory-Signature": signature(secret, stamp, raw)}


def deliver(client: FlaskClient, body: dict[str, Any] | bytes, *,
            timestamp: int | None = None) -> TestResponse:
    """POST a correctly signed completion event."""
    raw = body if isinstance(body, bytes) else json.dumps(body, ensure_ascii=False).encode()
    return client.post(WEBHOOK_PATH, data=raw, content_type="application/json",
                       headers=signed(raw, timestamp))


def envelope_error(response: TestResponse, status: int, code: int) -> dict[str, Any]:
    """The failure envelope of SPEC §4: status, code, a message, a timestamp and no data."""
    assert response.status_code == status, (response.status_code, response.text[:500])
    body = response.get_json()
    assert body is not None, response.text[:500]
    assert body["code"] == code, body
    assert isinstance(body["message"], str) and body["message"]
    assert isinstance(body["timestamp"], int) and "data" not in body
    return body
