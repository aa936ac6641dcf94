"""Test harness: MariaDB schema built by the migrations themselves, emptied between tests.

The database comes from TEST_DATABASE_URL (default: `memory_test` on the local MariaDB), Redis
from TEST_REDIS_URL (default: db 15 on the local Redis).
"""

from __future__ import annotations

import copy
import functools
import os
import re
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from flask import Flask
from flask.testing import FlaskClient
from flask_migrate import upgrade

from app import create_app
from app.auth import service as accounts
from app.auth.models import User
from app.database.batches import batch_all, rows
from app.db_types import utcnow
from app.extensions import db
from tests.redis_server import RedisServer

# Under pytest-xdist each worker process (gw0, gw1, …) has a database and a Redis db of its own:
# `memory_test_gw1`, db 14, … — every test empties them, so workers must never share one.
XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")


def _for_this_worker(database_url: str, redis_url: str) -> tuple[str, str]:
    if not XDIST_WORKER:
        return database_url, redis_url
    number = int(XDIST_WORKER.removeprefix("gw"))
    database = sa.make_url(database_url)
    database = database.set(database=f"{database.database}_{XDIST_WORKER}")
    base, _, index = redis_url.rpartition("/")
    return (database.render_as_string(hide_password=False),
            f"{base}/{int(index or 15) - number}")


def _without_tls_attempts(database_url: str) -> str:
    """PyMySQL 1.2 tries TLS on every connection unless told otherwise, loading the system's CA
    store each time (~25 ms of CPU); the suite opens thousands of connections to a local server
    without TLS. A URL that asks for TLS (any `ssl_*` option) keeps it."""
    url = sa.make_url(database_url)
    if url.drivername != "mysql+pymysql" or any(k.startswith("ssl") for k in url.query):
        return database_url
    return url.update_query_dict({"ssl_disabled": "true"}).render_as_string(hide_password=False)


TEST_DATABASE_URL, TEST_REDIS_URL = _for_this_worker(
    _without_tls_attempts(os.environ.get(
        "TEST_DATABASE_URL", "mysql+pymysql://root@127.0.0.1:3306/memory_test?charset=utf8mb4")),
    os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/15"))
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


def dispose_pools(app: Flask) -> None:
    """Close the hot paths' engines the app keeps beside its ORM engine."""
    app.extensions["hot_engines"].dispose()


def build_app(config: dict[str, Any]) -> Flask:
    """The app as `wsgi.py` puts it together: the web app and its background jobs."""
    import jobs

    app = create_app(config)
    jobs.init_app(app)
    return app


@functools.cache
def _observer(url: str) -> sa.Engine:
    """One connection, kept for the run, that looks at the server from outside the apps."""
    return sa.create_engine(url, poolclass=sa.pool.StaticPool, isolation_level="AUTOCOMMIT",
                            pool_pre_ping=True)


# One session's block in SHOW ENGINE INNODB STATUS: "---TRANSACTION …, ACTIVE 3 sec …" up to the
# next block, naming its connection ("MariaDB thread id 42, …").
_TRANSACTION = re.compile(r"^---TRANSACTION [^\n]*?, ACTIVE (?P<state>[^\n]*)\n(?P<body>.*?)"
                          r"(?=^---TRANSACTION |^-{8}|\Z)", re.M | re.S)
_THREAD = re.compile(r"(?:MariaDB|MySQL) thread id (\d+)")
_ROW_LOCKS = re.compile(r"(\d+) row lock\(s\)")


def open_transactions(url: str = TEST_DATABASE_URL) -> list[dict[str, Any]]:
    """Transactions open on the server from connections to the test database, but this one's:
    what a request, a job or a failure must never leave behind.

    Read from SHOW ENGINE INNODB STATUS, which is current: information_schema.INNODB_TRX is a
    copy refreshed only when nobody has read it for 100 ms, which parallel test workers reading
    it at each teardown keep from happening, so it shows transactions long ended."""
    if not url.startswith("mysql"):
        return []
    with _observer(url).connect() as conn:
        status = conn.execute(sa.text("SHOW ENGINE INNODB STATUS")).one()[-1]
        found = {}
        for block in _TRANSACTION.finditer(status):
            thread = _THREAD.search(block["body"])
            if thread:
                locks = _ROW_LOCKS.search(block["body"])
                found[int(thread[1])] = {"state": "LOCK WAIT" if "LOCK WAIT" in block[0]
                                         else f"ACTIVE {block['state']}",
                                         "rows_locked": int(locks[1]) if locks else 0}
        if not found:
            return []
        sessions = conn.execute(sa.text(
            "SELECT id, command, info FROM information_schema.processlist "
            "WHERE db = :db AND id <> CONNECTION_ID()"),
            {"db": sa.make_url(url).database}).all()
    return [{"thread": id_, **found[id_], "command": command, "query": info}
            for id_, command, info in sessions if id_ in found]


def session_locks(url: str = TEST_REDIS_URL) -> list[bytes]:
    """Session-lock keys left in the test Redis."""
    import redis

    from app.extraction.queue import SESSION_LOCK

    client = redis.Redis.from_url(url)
    try:
        return list(client.scan_iter(f"memory:*:{SESSION_LOCK}:*"))
    finally:
        client.close()


def assert_nothing_left_behind(apps: list[Flask]) -> None:
    """The liveness invariants, after a test and before its apps' pools are closed (closing
    them would end what was left open): no connection checked out of any pool of theirs, no
    transaction open on the server, no session lock in Redis."""
    deadline = time.monotonic() + 3
    while _checked_out(apps) and time.monotonic() < deadline:
        time.sleep(0.1)  # a live server's thread may still be ending its last request
    checked_out = _checked_out(apps)
    assert not checked_out, f"connections still checked out: {checked_out}"
    # Another process of an earlier test (a server or a worker being stopped) may still be
    # ending its own; what this test's apps left open stays open until their pools close.
    deadline = time.monotonic() + 3
    while (left_open := open_transactions()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert left_open == [], "a transaction was left open"
    assert session_locks() == [], "a session lock was left in Redis"


def _checked_out(apps: list[Flask]) -> dict[str, int]:
    checked_out = {}
    for app in apps:
        with app.app_context():
            db.session.remove()
            pools = [("orm", db.engine.pool)] + [
                (f"hot {n}", pool) for n, pool in enumerate(app.extensions["hot_engines"].pools())]
        checked_out.update({f"{id(app)} {name}": pool.checkedout() for name, pool in pools
                            if pool.checkedout()})
    return checked_out


def _close(app: Flask) -> None:
    with app.app_context():
        db.session.remove()
        db.engine.dispose()
    dispose_pools(app)


class AppsOfATest:
    """`make_app(**overrides)` builds an app with config overrides. After the test every app it
    used is checked to have left nothing behind; those built for it are then closed."""

    def __init__(self) -> None:
        self.built: list[Flask] = []
        self.used: list[Flask] = []
        # Called with whether the check passed.
        self.after_check: list[Callable[[bool], None]] = []

    def __call__(self, **overrides: Any) -> Flask:
        app = build_app(base_config(**overrides))
        self.built.append(app)
        self.used.append(app)
        return app


@pytest.fixture
def make_app(migrated_database: str) -> Iterator[AppsOfATest]:
    apps = AppsOfATest()
    yield apps
    clean = False
    try:
        assert_nothing_left_behind(apps.used)
        clean = True
    finally:
        for app in apps.built:
            _close(app)
        for then in apps.after_check:
            then(clean)


class DefaultApp:
    """The app of the default configuration, built once per test process and reused by every
    test that asks for `app`: building one (48 URL rules to compile, every extension) cost
    ~45 ms of CPU a test. A test that leaves it changed in a way the next could see — its
    configuration, its extensions, its URL map, its instance folder — gets it replaced."""

    def __init__(self) -> None:
        self.app: Flask | None = None
        self._as_built: tuple[Any, ...] = ()

    def _shape(self, app: Flask) -> tuple[Any, ...]:
        return (copy.deepcopy(dict(app.config)), dict(app.extensions),
                [rule.rule for rule in app.url_map.iter_rules()], app.instance_path,
                app.jinja_env.globals.copy())

    def get(self) -> Flask:
        if self.app is None:
            self.app = build_app(base_config())
            self._as_built = self._shape(self.app)
        return self.app

    def after_test(self, clean: bool) -> None:
        """Replace the app if the test changed it or left something behind in it (after the
        test's teardown and the check)."""
        if self.app is not None and (not clean or self._shape(self.app) != self._as_built):
            self.close()

    def close(self) -> None:
        if self.app is not None:
            _close(self.app)
            self.app = None


@pytest.fixture(scope="session")
def default_app(migrated_database: str) -> Iterator[DefaultApp]:
    shared = DefaultApp()
    yield shared
    shared.close()


@pytest.fixture
def app(make_app: AppsOfATest, default_app: DefaultApp) -> Flask:
    """The app of the default configuration on empty tables and an empty Redis db."""
    app = default_app.get()
    make_app.used.append(app)
    make_app.after_check.append(default_app.after_test)
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


@functools.cache
def _password_hash() -> str:
    from werkzeug.security import generate_password_hash

    return generate_password_hash(PASSWORD)


class Accounts:
    """Create users and credentials the way an operator would."""

    def __init__(self, app: Flask) -> None:
        self.app = app

    def user(self, name: str = "alice", *, user_id: int | None = None, admin: bool = False,
             grants: tuple[str, ...] = ()) -> int:
        with self.app.app_context():
            user = accounts.create_user(name, user_id=user_id, admin=admin)
            # scrypt is slow on purpose; hash the shared test password once per run.
            user.password_hash = _password_hash()
            db.session.commit()
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

    def __init__(self, client: FlaskClient, headers: dict[str, str],
                 user_id: int | None = None) -> None:
        self.client = client
        self.headers = headers
        self.user_id = user_id

    def call(self, method: str, path: str, json: Any = None, **kwargs: Any):
        headers = {**self.headers, **kwargs.pop("headers", {})}
        # Buffered: the answer is read and closed, as a server closes it once sent, which runs
        # what the endpoint left for then (`app.after_response`).
        response = self.client.open(path, method=method, json=json, headers=headers,
                                    buffered=True, **kwargs)
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
    def make(token: str, user_id: int | None = None) -> Api:
        return Api(client, {"Authorization": f"Bearer {token}"}, user_id)
    return make


@pytest.fixture
def as_service(client: FlaskClient):
    """`as_service(user_id)` → an Api client using the service token for that user."""
    def make(user_id: int | None = None) -> Api:
        headers = {"Authorization": f"Bearer {SERVICE_TOKEN}"}
        if user_id is not None:
            headers["X-User-Id"] = str(user_id)
        return Api(client, headers, user_id)
    return make


@pytest.fixture
def admin(users: Accounts, as_user) -> Api:
    """root, an administrator, with a personal token."""
    user_id = users.user("root", admin=True)
    return as_user(users.token("root"), user_id)


@pytest.fixture
def auditor(users: Accounts, as_user) -> Api:
    """A user holding memory:read (the auditor), with a personal token."""
    user_id = users.user("auditor", grants=("memory:read",))
    return as_user(users.token("auditor"), user_id)


@pytest.fixture
def alice(users: Accounts, as_user) -> Api:
    """A plain user with a personal token."""
    user_id = users.user("alice")
    return as_user(users.token("alice"), user_id)


@pytest.fixture
def bob(users: Accounts, as_user) -> Api:
    user_id = users.user("bob")
    return as_user(users.token("bob"), user_id)


class Memories:
    """Put memory rows straight into the database (state to start a test from)."""

    def __init__(self, app: Flask) -> None:
        self.app = app

    def add(self, user_id: int, content: str, *, scope: str = "USER", project_key: str = "",
            source: str = "MANUAL", status: str = "ACTIVE", updated_at: Any = None,
            origin_session_id: int | None = None) -> int:
        return self.bulk(user_id, [content], scope=scope, project_key=project_key,
                         source=source, status=status, updated_at=updated_at,
                         origin_session_id=origin_session_id)[0]

    def bulk(self, user_id: int, contents: list[str], *, scope: str = "USER",
             project_key: str = "", source: str = "MANUAL", status: str = "ACTIVE",
             updated_at: Any = None, origin_session_id: int | None = None) -> list[int]:
        """Rows whose updated_at grows with their position (the last is the newest)."""
        from app.memory import context, rules
        from app.memory.models import MemoryItem

        base = updated_at or (utcnow() - timedelta(days=1))
        with self.app.app_context():
            rows = [MemoryItem(user_id=user_id, scope=scope, project_key=project_key,
                               content=c, source=source, status=status,
                               dedup_hash=rules.dedup_hash(scope, project_key, c),
                               origin_session_id=origin_session_id, created_at=base,
                               updated_at=base + timedelta(milliseconds=i))
                    for i, c in enumerate(contents)]
            db.session.add_all(rows)
            db.session.commit()
            ids = [r.id for r in rows]
            db.session.remove()
            # Written behind the domain's back: tell the context cache as the domain would.
            context.cache().invalidate(user_id)
            return ids

    def get(self, item_id: int) -> dict[str, Any] | None:
        from app.memory.models import MemoryItem

        with self.app.app_context():
            item = db.session.scalar(sa.select(MemoryItem).where(MemoryItem.id == item_id))
            data = None if item is None else {**item.to_dict(), "dedupHash": item.dedup_hash,
                                                "rawUpdatedAt": item.updated_at}
            db.session.remove()
            return data

    def count(self, user_id: int | None = None, **filters: Any) -> int:
        from app.memory.models import MemoryItem

        with self.app.app_context():
            query = sa.select(sa.func.count()).select_from(MemoryItem)
            if user_id is not None:
                query = query.where(MemoryItem.user_id == user_id)
            for name, value in filters.items():
                query = query.where(getattr(MemoryItem, name) == value)
            total = db.session.scalar(query)
            db.session.remove()
            return total


def openapi_document(app: Flask) -> dict[str, Any]:
    """The OpenAPI document the app serves at /api/openapi.json."""
    response = app.test_client().get("/api/openapi.json")
    assert response.status_code == 200, response.text[:500]
    return response.get_json()


# Bookkeeping a refused request may still write: the token authenticated, then was refused.
BOOKKEEPING_COLUMNS = {"api_token": {"last_used_at"}}


@functools.cache
def _snapshot_reads() -> tuple[tuple[str, sa.Select], ...]:
    """One read per table of the schema: its columns but the bookkeeping, in key order. Built
    once: a batch compiles a statement once per statement object."""
    reads = []
    for table in db.metadata.sorted_tables:
        skipped = BOOKKEEPING_COLUMNS.get(table.name, set())
        columns = [column for column in table.columns if column.name not in skipped]
        reads.append((table.name, sa.select(*columns).order_by(*table.primary_key.columns)))
    return tuple(reads)


def snapshot(app: Flask) -> dict[str, list[tuple]]:
    """Every row of every table of the schema, in a stable order: compared before and after a
    refused request ("nothing changed"), a table added later included. A token's last use is
    left out (see BOOKKEEPING_COLUMNS). All tables in one round trip and one transaction."""
    reads = _snapshot_reads()
    with app.app_context(), db.engine.connect() as conn:
        found = batch_all(conn, [rows(read, {}) for _, read in reads])
    return {name: [tuple(row) for row in rows]
            for (name, _), rows in zip(reads, found, strict=True)}


@pytest.fixture
def memories(app: Flask) -> Memories:
    return Memories(app)


# ---- pages: logged in through the login form, talking to the pages the way htmx does ------
# Helpers live in tests/page_support.py (shared by the page, browser and security tests).

@pytest.fixture
def store(app: Flask):
    """Rows put straight into the tables to set a page's scene, each newer than the last."""
    from tests.page_support import Store

    return Store(app)


@pytest.fixture
def pages(app: Flask, client: FlaskClient, monkeypatch: pytest.MonkeyPatch):
    """A browser session to log in with; logins and page rendering made cheap (`speed_up`)."""
    from tests.page_support import PageSession, speed_up

    speed_up(app, monkeypatch)
    return PageSession(client)


@pytest.fixture
def alice_page(users: Accounts, pages):
    """alice, an ordinary user, logged in."""
    pages.user_id = users.user("alice")
    pages.login("alice")
    return pages


@pytest.fixture
def admin_page(users: Accounts, pages):
    """root, an administrator, logged in."""
    pages.user_id = users.user("root", admin=True)
    pages.login("root")
    return pages


@pytest.fixture
def auditor_page(users: Accounts, pages):
    """A user holding memory:read (the auditor), logged in."""
    pages.user_id = users.user("auditor", grants=("memory:read",))
    pages.login("auditor")
    return pages


class Metrics:
    """`/metrics` read as numbers. Every process of the run adds to the same counters, which
    only grow, so a test reads what was added since it began (`added`)."""

    _SAMPLE = re.compile(r"^(\w+\{[^}]*\}|\w+) (\S+)$", re.M)

    def __init__(self, client: FlaskClient) -> None:
        self.client = client
        self.start = self.read()

    def read(self) -> dict[str, float]:
        response = self.client.get("/metrics")
        assert response.status_code == 200, response.text[:300]
        return {key: float(value) for key, value in self._SAMPLE.findall(response.text)}

    @staticmethod
    def key(name: str, **labels: Any) -> str:
        """A sample's key as the exposition writes it: labels in name order."""
        return name + ("{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"
                       if labels else "")

    def added(self, name: str, **labels: Any) -> float:
        """How much the sample grew since the test began (0 when it never existed)."""
        key = self.key(name, **labels)
        return self.read().get(key, 0.0) - self.start.get(key, 0.0)


@pytest.fixture
def metrics(client: FlaskClient) -> Metrics:
    """The metrics as they were when the test began (ask for it before anything happens)."""
    return Metrics(client)


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


# ---- extraction pipeline (issue 4): scripted LLM server, signed webhook, queued jobs --------
# Helpers live in tests/llm_server.py and tests/extraction/support.py.

@pytest.fixture
def llm(app: Flask, monkeypatch: pytest.MonkeyPatch):
    """The scripted OpenAI-compatible server, registered as the default model.

    OPENAI_BASE_URL/OPENAI_API_KEY point at it too, for models that name no endpoint; worker
    subprocesses inherit them.
    """
    from app.system import service as system
    from tests.llm_server import ScriptedLlm

    server = ScriptedLlm()
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "test-openai-key")
    with app.app_context():
        system.add_model("scripted", "scripted-default", base_url=server.base_url, default=True)
        db.session.remove()
    yield server
    server.close()


@pytest.fixture
def webhook(client: FlaskClient):
    """`webhook(body)` → (status, envelope) of a correctly signed delivery."""
    from tests.completions import post_webhook

    return functools.partial(post_webhook, client, secret=WEBHOOK_SECRET)


@pytest.fixture
def run_jobs(app: Flask):
    """`run_jobs()` runs every queued job in-process with the app's RQ worker class."""
    from tests.completions import run_jobs

    return functools.partial(run_jobs, app)


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A redis-server of this test's own: stopping or pausing it touches no other test."""
    server = RedisServer(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()
