"""Shared by the page tests (tests/, tests/user, tests/admin), the browser tests and the security
tests: rows put straight into the tables, a browser session logged in through the login form, and
what makes rendering pages cheap."""

from __future__ import annotations

import functools
import re
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from flask import Flask
from flask.testing import FlaskClient
from jinja2 import BytecodeCache
from jinja2.bccache import Bucket
from werkzeug.security import generate_password_hash
from werkzeug.test import TestResponse

from app.db_types import utcnow
from app.extensions import db
from app.memory import context, rules
from app.memory.models import MemoryEvent, MemoryItem
from app.sessions.models import PlatformSession
from tests import conftest as shared_conftest
from tests.conftest import PASSWORD


class Store:
    """Rows put straight into the tables, to set a scene; pages are what the tests exercise."""

    def __init__(self, app: Flask) -> None:
        self.app = app
        self._clock = utcnow() - timedelta(days=1)

    def add(self, user_id: int, content: str, *, scope: str = "USER", project_key: str = "",
            source: str = "MANUAL", status: str = "ACTIVE") -> int:
        """A memory, newer than every one added before it."""
        return self.add_many(user_id, [content], scope=scope, project_key=project_key,
                             source=source, status=status)[0]

    def add_many(self, user_id: int, contents: list[str], **fields: Any) -> list[int]:
        with self.app.app_context():
            rows = [self._row(user_id, content, **fields) for content in contents]
            db.session.add_all(rows)
            db.session.commit()
            # Written behind the domain's back: tell the context cache as the domain would.
            context.cache().invalidate(user_id)
            return [row.id for row in rows]

    def _row(self, user_id: int, content: str, *, scope: str = "USER", project_key: str = "",
             source: str = "MANUAL", status: str = "ACTIVE") -> MemoryItem:
        self._clock += timedelta(seconds=1)
        return MemoryItem(user_id=user_id, scope=scope, project_key=project_key,
                          content=content, source=source, status=status,
                          dedup_hash=rules.dedup_hash(scope, project_key, content),
                          created_at=self._clock, updated_at=self._clock)

    def get(self, item_id: int) -> dict[str, Any] | None:
        with self.app.app_context():
            item = db.session.scalar(sa.select(MemoryItem).where(MemoryItem.id == item_id))
            return item.to_dict() if item else None

    def of(self, user_id: int) -> list[dict[str, Any]]:
        with self.app.app_context():
            rows = db.session.scalars(db.select(MemoryItem).where(MemoryItem.user_id == user_id)
                                      .order_by(MemoryItem.id))
            return [row.to_dict() for row in rows]

    def journal(self, user_id: int, item_id: int, *events: dict[str, Any]) -> None:
        """memory_event rows for a scene: each `{"type", "actor", ...}`, a second apart."""
        with self.app.app_context():
            db.session.add_all(
                MemoryEvent(user_id=user_id, memory_id=item_id,
                            at=self._clock + timedelta(seconds=i), **event)
                for i, event in enumerate(events))
            db.session.commit()

    def session(self, user_id: int, project_key: str, session_id: int) -> None:
        """A platform session in `project_key`: what makes it a project of the user."""
        with self.app.app_context():
            db.session.add(PlatformSession(id=session_id, user_id=user_id,
                                           project_key=project_key, session_type="NORMAL",
                                           channel="WEB"))
            db.session.commit()


_CSRF_META = re.compile(r'<meta name="csrf-token" content="([^"]+)">')


def csrf_from(html: str) -> str:
    match = _CSRF_META.search(html)
    assert match, "page carries no csrf-token meta"
    return match.group(1)


class PageSession:
    """One logged-in browser: the session cookie and the CSRF token the page gave it."""

    def __init__(self, client: FlaskClient) -> None:
        self.client = client
        self.csrf = ""
        self.user_id = 0

    def login(self, username: str, password: str = PASSWORD, next_url: str | None = None
              ) -> TestResponse:
        form = {"username": username, "password": password,
                "csrf_token": csrf_from(self.client.get("/login").text)}
        if next_url:
            form["next"] = next_url
        response = self.client.post("/login", data=form)
        assert response.status_code == 302, response.text
        # Login starts a new session, so the token comes from a page rendered after it.
        self.csrf = csrf_from(self.client.get("/login").text)
        return response

    def get(self, path: str, **headers: str) -> TestResponse:
        """A plain browser navigation."""
        return self.client.get(path, headers=headers)

    def htmx(self, method: str, path: str, data: dict[str, str] | None = None, *,
             csrf: bool = True, headers: dict[str, str] | None = None) -> TestResponse:
        """What htmx sends: HX-Request, and the token from <body hx-headers> unless told not."""
        sent = {"HX-Request": "true", **(headers or {})}
        if csrf:
            sent["X-CSRF-Token"] = self.csrf
        return self.client.open(path, method=method, data=data, headers=sent)


class TemplateCache(BytecodeCache):
    """Compiled templates kept across the apps of one run (each test builds its own app).

    Keys include the template source's checksum, so an edited template is compiled again.
    """

    def __init__(self) -> None:
        self._store: dict[str, bytes] = {}

    def load_bytecode(self, bucket: Bucket) -> None:
        code = self._store.get(bucket.key)
        if code is not None:
            bucket.bytecode_from_string(code)

    def dump_bytecode(self, bucket: Bucket) -> None:
        self._store[bucket.key] = bucket.bytecode_to_string()


TEMPLATE_CACHE = TemplateCache()


@functools.cache
def _cheap_password_hash() -> str:
    return generate_password_hash(PASSWORD, method="pbkdf2:sha256:1000")


def speed_up(app: Flask, monkeypatch: pytest.MonkeyPatch) -> None:
    """What page and browser tests do in every test, made cheap without changing what runs.

    The login still checks a real password hash, only a low-cost one (scrypt spends a fifth of a
    second per login); templates are compiled once per run rather than once per test's app.
    """
    monkeypatch.setattr(shared_conftest, "_password_hash", _cheap_password_hash)
    app.jinja_env.bytecode_cache = TEMPLATE_CACHE


def login(client: Any, username: str = "alice", password: str = PASSWORD) -> tuple[Any, str]:
    """Log in through the login form with a test client; its answer and the form's token."""
    token = csrf_from(client.get("/login").get_data(as_text=True))
    response = client.post("/login", data={"username": username, "password": password,
                                            "csrf_token": token})
    return response, token
