"""Test harness: MariaDB schema built by the migrations themselves, emptied between tests.

The database comes from TEST_DATABASE_URL (default: `memory_test` on the local MariaDB), Redis
from TEST_REDIS_URL (default: db 15 on the local Redis).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from flask import Flask
from flask.testing import FlaskClient
from flask_migrate import upgrade

from app import create_app
from app.auth import service as accounts
from app.auth.models import User
from app.extensions import db

TEST_DATABASE_URL = os.environ.get(
    "TEST_DATABASE_URL", "mysql+pymysql://root@127.0.0.1:3306/memory_test?charset=utf8mb4"
)
TEST_REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
SERVICE_TOKEN = "test-service-token"
WEBHOOK_SECRET = "test-webhook-secret"
PASSWORD = "correct horse battery"

# Rows the migrations seed; restored after each test empties the tables.
SEEDED_TABLES = ("permission", "system_setting")
_seed_rows: dict[str, list[dict[str, Any]]] = {}


def base_config(**overrides: Any) -> dict[str, Any]:
    config = {
        "TESTING": True,
        "SECRET_KEY": "test-secret-key",
        "SQLALCHEMY_DATABASE_URI": TEST_DATABASE_URL,
        "REDIS_URL": TEST_REDIS_URL,
        "MEMORY_SERVICE_TOKEN": SERVICE_TOKEN,
        "MEMORY_WEBHOOK_SECRET": WEBHOOK_SECRET,
        "MEMORY_LLM_TIMEOUT_S": 5.0,
        "MEMORY_BOT_PROJECT_KEYS": ("weixin-bot",),
    }
    config.update(overrides)
    return config


def _recreate_database(url: str) -> None:
    """Drop and create the test database so the migrations start from nothing."""
    parsed = sa.make_url(url)
    server = sa.create_engine(parsed.set(database=""), isolation_level="AUTOCOMMIT")
    with server.connect() as conn:
        conn.execute(sa.text(f"DROP DATABASE IF EXISTS `{parsed.database}`"))
        conn.execute(sa.text(
            f"CREATE DATABASE `{parsed.database}` CHARACTER SET utf8mb4 "
            "COLLATE utf8mb4_unicode_ci"))
    server.dispose()


@pytest.fixture(scope="session")
def migrated_database() -> str:
    """The test database, built once per run with `db upgrade`."""
    _recreate_database(TEST_DATABASE_URL)
    app = create_app(base_config())
    with app.app_context():
        upgrade()
        for table in SEEDED_TABLES:
            rows = db.session.execute(sa.text(f"SELECT * FROM `{table}`")).mappings().all()
            _seed_rows[table] = [dict(r) for r in rows]
        db.engine.dispose()
    return TEST_DATABASE_URL


def _empty_tables(app: Flask) -> None:
    with app.app_context():
        tables = [t for t in db.metadata.sorted_tables]
        with db.engine.begin() as conn:
            conn.execute(sa.text("SET FOREIGN_KEY_CHECKS = 0"))
            for table in tables:
                conn.execute(table.delete())
            conn.execute(sa.text("SET FOREIGN_KEY_CHECKS = 1"))
            for name, rows in _seed_rows.items():
                if rows:
                    conn.execute(db.metadata.tables[name].insert(), rows)


def _flush_redis(url: str) -> None:
    import redis

    client = redis.Redis.from_url(url)
    client.flushdb()
    client.close()


@pytest.fixture
def make_app(migrated_database: str) -> Iterator[Any]:
    """Build an app with config overrides; every app made is cleaned up after the test."""
    apps: list[Flask] = []

    def factory(**overrides: Any) -> Flask:
        app = create_app(base_config(**overrides))
        apps.append(app)
        return app

    yield factory
    for app in apps:
        with app.app_context():
            db.session.remove()
            db.engine.dispose()


@pytest.fixture
def app(make_app: Any) -> Flask:
    app = make_app()
    _empty_tables(app)
    _flush_redis(TEST_REDIS_URL)
    return app


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()


@pytest.fixture
def runner(app: Flask):
    return app.test_cli_runner()


@pytest.fixture
def ctx(app: Flask) -> Iterator[None]:
    """An app context for tests that call the domain directly."""
    with app.app_context():
        yield
        db.session.remove()


class Accounts:
    """Create users and credentials the way an operator would."""

    def __init__(self, app: Flask) -> None:
        self.app = app

    def user(self, name: str = "alice", *, user_id: int | None = None, admin: bool = False,
             grants: tuple[str, ...] = ()) -> int:
        with self.app.app_context():
            user = accounts.create_user(name, user_id=user_id, password=PASSWORD, admin=admin)
            for code in grants:
                accounts.grant(name, code)
            return user.id

    def token(self, name: str) -> str:
        with self.app.app_context():
            return accounts.issue_token(User.by_username(name))


@pytest.fixture
def users(app: Flask) -> Accounts:
    return Accounts(app)


class Api:
    """Call the JSON API as one principal; returns (status, envelope)."""

    def __init__(self, client: FlaskClient, headers: dict[str, str]) -> None:
        self.client = client
        self.headers = headers

    def call(self, method: str, path: str, json: Any = None, **kwargs: Any):
        headers = {**self.headers, **kwargs.pop("headers", {})}
        response = self.client.open(path, method=method, json=json, headers=headers, **kwargs)
        return response.status_code, response.get_json()

    def get(self, path: str, **kwargs: Any):
        return self.call("GET", path, **kwargs)

    def post(self, path: str, json: Any = None, **kwargs: Any):
        return self.call("POST", path, json, **kwargs)

    def patch(self, path: str, json: Any = None, **kwargs: Any):
        return self.call("PATCH", path, json, **kwargs)

    def put(self, path: str, json: Any = None, **kwargs: Any):
        return self.call("PUT", path, json, **kwargs)

    def delete(self, path: str, **kwargs: Any):
        return self.call("DELETE", path, **kwargs)


@pytest.fixture
def as_user(client: FlaskClient):
    """`as_user(token)` → an Api client authenticated with a personal token."""
    def make(token: str) -> Api:
        return Api(client, {"Authorization": f"Bearer {token}"})
    return make


@pytest.fixture
def as_service(client: FlaskClient):
    """`as_service(user_id)` → an Api client using the service token for that user."""
    def make(user_id: int | None = None) -> Api:
        headers = {"Authorization": f"Bearer {SERVICE_TOKEN}"}
        if user_id is not None:
            headers["X-User-Id"] = str(user_id)
        return Api(client, headers)
    return make


@pytest.fixture
def alice(users: Accounts, as_user) -> Api:
    """A plain user with a personal token."""
    users.user("alice")
    return as_user(users.token("alice"))


@pytest.fixture
def bob(users: Accounts, as_user) -> Api:
    users.user("bob")
    return as_user(users.token("bob"))


def assert_error(result: tuple[int, Any], http_status: int, code: int) -> dict[str, Any]:
    """An error envelope: the HTTP status, the code, a message, a timestamp and no data."""
    status, body = result
    assert status == http_status, body
    assert body["code"] == code, body
    assert isinstance(body["message"], str) and body["message"]
    assert isinstance(body["timestamp"], int)
    assert "data" not in body
    return body


def assert_ok(result: tuple[int, Any], http_status: int = 200) -> Any:
    status, body = result
    assert status == http_status, body
    assert body["code"] == 0 and body["message"] == "success", body
    assert isinstance(body["timestamp"], int)
    return body["data"]
