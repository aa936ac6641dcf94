"""Shared by page and browser tests: scenes put straight into the tables, a template cache."""

from __future__ import annotations

import functools
from datetime import timedelta
from typing import Any

import pytest
from flask import Flask
from jinja2 import BytecodeCache
from jinja2.bccache import Bucket
from werkzeug.security import generate_password_hash

from app.db_types import utcnow
from app.extensions import db
from app.memory import rules
from app.memory.models import MemoryItem
from app.sessions.models import PlatformSession
from tests import conftest as shared_conftest
from tests.conftest import PASSWORD


class Memories:
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
            item = db.session.get(MemoryItem, item_id)
            return item.to_dict() if item else None

    def of(self, user_id: int) -> list[dict[str, Any]]:
        with self.app.app_context():
            rows = db.session.scalars(db.select(MemoryItem).where(MemoryItem.user_id == user_id)
                                      .order_by(MemoryItem.id))
            return [row.to_dict() for row in rows]

    def session(self, user_id: int, project_key: str, session_id: int) -> None:
        """A platform session in `project_key`: what makes it a project of the user."""
        with self.app.app_context():
            db.session.add(PlatformSession(id=session_id, user_id=user_id,
                                           project_key=project_key, session_type="NORMAL",
                                           channel="WEB"))
            db.session.commit()


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
