"""The service on a three-node MariaDB Galera cluster behind HAProxy (issue 26), unchanged apart
from DATABASE_URL: migrations, the webhook, real workers, consolidation, the context read and
the pages — and what Galera does differently from one server (docs/operations-galera.md)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from flask import Flask
from sqlalchemy.exc import OperationalError

from app.database.engines import hot_engines
from app.db_types import utcnow
from app.errors import DomainError
from app.extensions import db
from app.memory import service as memory_service
from app.memory.models import MemoryItem
from app.memory.rules import ACTIVE_PER_USER_MAX, Scope, dedup_hash
from app.platform import client as platform
from tests.cluster.conftest import ROOT, GaleraCluster
from tests.completions import (
    USER_ID,
    capture_on,
    enqueue_consolidation,
    event,
    last_consolidation,
    outcomes,
)
from tests.conftest import (
    SERVICE_TOKEN,
    TEST_REDIS_URL,
    WEBHOOK_SECRET,
    _empty_tables,
    _flush_redis,
)
from tests.llm_server import _Handler, _Script, _Server
from tests.serving import gunicorn
from tests.workers import (
    missing_outcomes_report,
    registered_workers,
    wait_for_progress,
    wait_until,
    worker_env,
    worker_processes,
)

# One xdist worker runs every cluster test: the clusters have fixed ports and start once.
pytestmark = pytest.mark.xdist_group("cluster")

DEADLOCK = 1213


def test_the_cluster_tests_run_in_one_xdist_worker(request: pytest.FixtureRequest) -> None:
    """In parallel runs xdist sends a group to one worker by a suffix of the test's id; without
    it each worker would start its own cluster on the same ports."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        assert request.node.nodeid.endswith("@cluster"), \
            "run with --dist loadgroup, on a pytest whose ids xdist can extend (pyproject.toml)"


@pytest.fixture(scope="module")
def galera_schema(galera: GaleraCluster) -> GaleraCluster:
    """The test database on the cluster, built by `flask --app wsgi db upgrade` through
    HAProxy, as an operator would."""
    server = sa.create_engine(galera.url().replace(f"/{galera.database}", "/"))
    with server.begin() as conn:
        conn.execute(sa.text(f"DROP DATABASE IF EXISTS `{galera.database}`"))
        conn.execute(sa.text(f"CREATE DATABASE `{galera.database}` CHARACTER SET utf8mb4 "
                             "COLLATE utf8mb4_unicode_ci"))
    server.dispose()
    upgrade = subprocess.run([sys.executable, "-m", "flask", "--app", "wsgi", "db", "upgrade"],
                             cwd=ROOT, env=worker_env(DATABASE_URL=galera.url()),
                             capture_output=True, text=True, timeout=300)
    assert upgrade.returncode == 0, upgrade.stderr
    return galera


@pytest.fixture
def app(make_app: Any, galera_schema: GaleraCluster) -> Flask:
    """This folder's `app`: the service on the cluster, through HAProxy."""
    app = make_app(SQLALCHEMY_DATABASE_URI=galera_schema.url())
    _empty_tables(app)
    _flush_redis(TEST_REDIS_URL)
    return app


def _outcome_count(app: Flask) -> int:
    """How many outcomes there are: a count (~1 ms), not the rows (`outcomes`: ~85 ms of CPU
    here and a scan on the writer per poll at 1,800 rows), polled while the workers need both."""
    return _query(app, "SELECT COUNT(*) FROM memory_job_outcome")[0][0]


def _query(app: Flask, sql: str, **params: Any) -> list[tuple]:
    with app.app_context():
        rows = [tuple(r) for r in db.session.execute(sa.text(sql), params)]
        db.session.remove()
    return rows


def test_the_migrations_leave_every_table_on_innodb_with_a_primary_key(app, galera_schema):
    """Galera replicates InnoDB only, and a table without a primary key replicates row by row
    with no key to certify against (MariaDB refuses DML on it under wsrep_mode
    REQUIRED_PRIMARY_KEY)."""
    tables = _query(app, """
        SELECT t.TABLE_NAME, t.ENGINE, c.CONSTRAINT_NAME FROM information_schema.TABLES t
        LEFT JOIN information_schema.TABLE_CONSTRAINTS c ON c.TABLE_SCHEMA = t.TABLE_SCHEMA
             AND c.TABLE_NAME = t.TABLE_NAME AND c.CONSTRAINT_TYPE = 'PRIMARY KEY'
        WHERE t.TABLE_SCHEMA = DATABASE()""")
    assert len(tables) > 10
    assert [t for t in tables if t[1] != "InnoDB" or t[2] is None] == []
    # Every node has the schema (DDL replicates as total order isolation).
    for node in (1, 2, 3):
        engine = sa.create_engine(galera_schema.url(node))
        with engine.connect() as conn:
            count = conn.scalar(sa.text("SELECT COUNT(*) FROM information_schema.TABLES "
                                        "WHERE TABLE_SCHEMA = DATABASE()"))
        engine.dispose()
        assert count == len(tables)


def test_every_connection_to_a_galera_node_reads_causally(app):
    """A node applies other nodes' commits a moment after they commit: without
    wsrep_sync_wait a read could miss a change already committed, and the context cache would
    keep the older block under the current version."""
    with app.app_context():
        assert db.session.scalar(sa.text("SELECT @@wsrep_sync_wait")) == 1
        db.session.remove()
        engines = hot_engines()
        for engine in (engines.reads, engines.writes):
            with engine.connect() as conn:
                assert conn.scalar(sa.text("SELECT @@wsrep_sync_wait")) == 1


def test_a_change_through_one_node_is_in_the_next_context_read_through_another(make_app,
                                                                               galera_schema,
                                                                               app):
    """Each write goes to node 1 and the read right after it to node 2: every read shows it."""
    writer = make_app(SQLALCHEMY_DATABASE_URI=galera_schema.url(1))
    reader = make_app(SQLALCHEMY_DATABASE_URI=galera_schema.url(2))
    capture_on(app)
    with writer.app_context():
        item_id = memory_service.create_item(USER_ID, Scope.USER, "版本 0 的偏好说明文字").id
        db.session.remove()
    for n in range(1, 41):
        with writer.app_context():
            memory_service.update_item(USER_ID, item_id, content=f"版本 {n} 的偏好说明文字")
            db.session.remove()
        with reader.app_context():
            block = json.loads(memory_service.context_json(USER_ID, None))
            db.session.remove()
        assert [m["content"] for m in block["memories"]] == [f"版本 {n} 的偏好说明文字"]


def test_writers_on_two_nodes_at_once_never_pass_the_200_cap(make_app, galera_schema, app):
    """A row lock taken on one node is unknown to the others, so the cap's per-user lock is a
    write (migration 0006): two nodes' writers then conflict at certification and one commit
    is refused with a deadlock (1213), which the unit of work retries or answers 503."""
    capture_on(app)
    with app.app_context():
        rows = [{"user_id": USER_ID, "scope": "USER", "project_key": "", "content": f"预置 {n}",
                 "dedup_hash": dedup_hash(Scope.USER, None, f"预置 {n}"), "status": "ACTIVE",
                 "source": "MANUAL",
                 "created_at": utcnow(), "updated_at": utcnow()}
                for n in range(ACTIVE_PER_USER_MAX - 4)]
        db.session.execute(sa.insert(MemoryItem.__table__), rows)
        db.session.commit()
        db.session.remove()
    nodes = [make_app(SQLALCHEMY_DATABASE_URI=galera_schema.url(n)) for n in (1, 2)]
    results: Counter[str] = Counter()
    start = threading.Barrier(4)

    def add(node: Flask, writer: int) -> None:
        start.wait()
        for n in range(6):
            with node.app_context():
                try:
                    memory_service.create_item(USER_ID, Scope.USER, f"并发写入 {writer}-{n}")
                    results["created"] += 1
                except DomainError:
                    results["cap"] += 1
                except OperationalError as error:
                    assert error.orig.args[0] == DEADLOCK, error
                    results["deadlock"] += 1
                finally:
                    db.session.remove()

    threads = [threading.Thread(target=add, args=(nodes[i % 2], i)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    active = _query(app, "SELECT COUNT(*) FROM memory_item WHERE user_id = :u AND "
                         "status = 'ACTIVE'", u=USER_ID)[0][0]
    assert active == ACTIVE_PER_USER_MAX, (active, results)
    assert results["created"] == 4, results
    assert sum(results.values()) == 24


def test_ids_come_in_steps_of_the_cluster_size(app):
    """wsrep_auto_increment_control gives each node its own offset: ids are unique but not
    consecutive, and not in commit order across nodes. The service orders by time and uses ids
    only as names."""
    assert _query(app, "SELECT @@auto_increment_increment")[0][0] == 3


def test_webhook_workers_consolidation_context_and_pages_run_on_galera(app, llm, galera_schema,
                                                                      tmp_path, alice_page):
    capture_on(app)
    last_consolidation(app, utcnow())  # no consolidation of its own after the extractions
    llm.reply_items([{"type": "user", "content": "报告都用中文来写"}])
    llm.reply_items([{"type": "user", "content": "总结也用中文来写"}])
    env = {"DATABASE_URL": galera_schema.url(), "REDIS_URL": TEST_REDIS_URL,
           "MEMORY_WEBHOOK_SECRET": WEBHOOK_SECRET, "MEMORY_SERVICE_TOKEN": SERVICE_TOKEN,
           "SECRET_KEY": "one-key-for-every-web-process", "MEMORY_LLM_TIMEOUT_S": "5"}
    with (gunicorn(tmp_path, "web", **env) as web,
          worker_processes(1, tmp_path, DATABASE_URL=galera_schema.url())):
        wait_until(lambda: registered_workers() == 1, 60, "a registered worker")
        for n in range(2):
            answer = platform.deliver(web.url, WEBHOOK_SECRET,
                                      event(eventId=f"evt-galera-{n}", sessionId=500 + n))
            assert answer.status == 202, answer
            assert json.loads(answer.body)["data"]["reason"] == "enqueued"
        wait_until(lambda: len(outcomes(app)) == 2, 60, "two extraction outcomes")
        learned = _query(app, "SELECT id FROM memory_item WHERE user_id = :u ORDER BY id",
                         u=USER_ID)
        assert len(learned) == 2
        llm.reply_items([{"op": "merge", "sourceIds": [r[0] for r in learned],
                          "content": "报告和总结都用中文"}])
        job_id = enqueue_consolidation(app)
        wait_until(lambda: any(o["jobId"] == job_id for o in outcomes(app)), 60,
                   "the consolidation's outcome")
        (consolidated,) = [o for o in outcomes(app) if o["jobId"] == job_id]
        assert (consolidated["status"], consolidated["merges"]) == ("succeeded", 1), consolidated
        request = urllib.request.Request(
            f"{web.url}/api/v1/internal/memory/context?userId={USER_ID}",
            headers={"Authorization": f"Bearer {SERVICE_TOKEN}"})
        with urllib.request.urlopen(request, timeout=10) as response:
            block = json.loads(response.read())["data"]
    assert [m["content"] for m in block["memories"]] == ["报告和总结都用中文"]
    assert {o["status"] for o in outcomes(app)} == {"succeeded"}

    with app.app_context():
        memory_service.create_item(alice_page.user_id, Scope.USER, "页面上看得到的一条记忆")
        db.session.remove()
    page = alice_page.get("/settings/memory")
    assert page.status_code == 200
    assert "页面上看得到的一条记忆" in page.get_data(as_text=True)


def _nodes_behind_the_proxy(cluster: GaleraCluster, connections: int = 9) -> set[int]:
    """The nodes (1-3) that new connections through HAProxy reach."""
    engine = sa.create_engine(cluster.url(), poolclass=sa.pool.NullPool)
    try:
        ports = set()
        for _ in range(connections):
            with engine.connect() as conn:
                ports.add(conn.scalar(sa.text("SELECT @@port")))
    finally:
        engine.dispose()
    return {cluster.node_ports.index(port) + 1 for port in ports}


def _writer(cluster: GaleraCluster) -> int | None:
    """The node a new connection through HAProxy reaches now, if one does."""
    try:
        return _nodes_behind_the_proxy(cluster, 1).pop()
    except OperationalError:
        return None


def test_haproxy_sends_every_connection_to_one_writer(galera_schema):
    """Writes through one node never meet another node's at certification: node 1 takes every
    connection, nodes 2 and 3 are hot standbys (`backup`)."""
    assert _nodes_behind_the_proxy(galera_schema) == {1}


def test_haproxy_sends_no_connection_to_a_node_that_is_not_synced(galera_schema):
    """A node that answers but is not Synced (desynced for a backup, joining) would serve rows
    behind the cluster's or refuse queries: HAProxy's check takes it out until it is Synced
    again (scripts/galera-node-check.sh), and the first standby takes the connections."""
    node1 = sa.create_engine(galera_schema.url(1), poolclass=sa.pool.NullPool,
                             isolation_level="AUTOCOMMIT")
    with node1.connect() as conn:
        conn.execute(sa.text("SET GLOBAL wsrep_desync = ON"))
    try:
        wait_until(lambda: "node1 DOWN" in galera_schema.script("proxy"), 10,
                   "HAProxy to take the desynced node out")
        assert _nodes_behind_the_proxy(galera_schema) == {2}
    finally:
        with node1.connect() as conn:
            conn.execute(sa.text("SET GLOBAL wsrep_desync = OFF"))
        node1.dispose()
    wait_until(lambda: galera_schema.script("proxy").count(" UP ") == 3, 10,
               "HAProxy to take the node back once Synced")
    assert _nodes_behind_the_proxy(galera_schema) == {1}


def test_the_cluster_is_secured_by_passwords_tls_and_a_binary_log_with_gtids(galera_schema):
    """What the script makes per cluster: root needs its password and TLS over TCP, state
    transfers go over TLS as their own user, and every node keeps a binary log with the
    cluster's GTIDs (what a replica outside the cluster follows)."""
    anonymous = sa.create_engine(galera_schema.url().replace(f":{galera_schema.password}@", "@"),
                                 poolclass=sa.pool.NullPool)
    with pytest.raises(OperationalError):
        anonymous.connect().close()
    plain = sa.create_engine(galera_schema.url(), poolclass=sa.pool.NullPool,
                             connect_args={"ssl_disabled": True})
    with pytest.raises(OperationalError):
        plain.connect().close()
    for node in (1, 2, 3):
        engine = sa.create_engine(galera_schema.url(node), poolclass=sa.pool.NullPool)
        with engine.connect() as conn:
            cipher = conn.execute(sa.text("SHOW SESSION STATUS LIKE 'Ssl_cipher'")).one()[1]
            settings = dict(conn.execute(sa.text(
                "SHOW VARIABLES WHERE Variable_name IN ('log_bin', 'wsrep_gtid_mode', "
                "'wsrep_sst_method', 'wsrep_provider_options')")).all())
            gtid = conn.scalar(sa.text("SELECT @@gtid_binlog_pos"))
        engine.dispose()
        assert cipher
        assert (settings["log_bin"], settings["wsrep_gtid_mode"],
                settings["wsrep_sst_method"]) == ("ON", "ON", "mariabackup")
        assert "socket.ssl = YES" in settings["wsrep_provider_options"]
        assert gtid.startswith("1-1-"), gtid


# ---- node loss under load -------------------------------------------------------------------

# Every delivery is an extraction job (an LLM call and a transaction on the cluster): about
# 670 are answered before the node is lost, 670 while it is gone and rejoining, 670 after.
DELIVERIES = 2000
SENDERS = 4
PACE_S = 0.02  # between one sender's deliveries: the run lasts long enough to lose a node in
LOAD_USERS = tuple(range(9001, 9021))
CAPPED_USER = LOAD_USERS[0]  # starts 10 below the cap and receives 100 deliveries
EDITOR = 9100
KILLED_NODE = 1  # the writer: its standby takes over, and it takes the writes back once Synced
OUTCOME_STALL_S = 120  # the longest wait for the next outcome before a job counts as lost


class _EchoHandler(_Handler):
    """An OpenAI-compatible model that learns one fact per conversation, named after the task
    number in its message: the same conversation always teaches the same words, so a job run
    twice could only duplicate, never invent, a memory."""

    def _answer(self, request: Any, reply: Any) -> None:
        found = re.search(r"任务#(\d+)", json.dumps(request.body, ensure_ascii=False))
        items = [{"type": "user", "content": f"第{found.group(1)}号事实需要记住"}] if found else []
        completion = {"id": "chatcmpl-echo", "object": "chat.completion",
                      "created": int(time.time()), "model": request.model,
                      "choices": [{"index": 0, "finish_reason": "stop", "message": {
                          "role": "assistant", "content": json.dumps(items, ensure_ascii=False)}}],
                      "usage": {"prompt_tokens": 100, "completion_tokens": 10,
                                "total_tokens": 110}}
        self._send(200, json.dumps(completion, ensure_ascii=False).encode())


@pytest.fixture
def echo_llm(app: Flask, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    from app.system import service as system

    server = _Server(("127.0.0.1", 0), _EchoHandler)
    server.script = _Script()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    monkeypatch.setenv("OPENAI_API_KEY", "test-openai-key")
    with app.app_context():
        system.add_model("echo", "echo-model", base_url=url, default=True)
        db.session.remove()
    yield url
    server.shutdown()
    server.server_close()


def _http(method: str, url: str, headers: dict[str, str], body: dict | None = None
          ) -> tuple[int, dict | None]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={**headers, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, None
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return 0, None


class WriteProbe:
    """A small write through HAProxy every 20 ms on a connection of its own: the longest gap
    between two successful writes is the write stall a node loss costs (printed, not
    asserted: its length is the timeouts', docs/operations-galera.md)."""

    def __init__(self, cluster: GaleraCluster) -> None:
        server = sa.create_engine(cluster.url().replace(f"/{cluster.database}", "/"),
                                  poolclass=sa.pool.NullPool, isolation_level="AUTOCOMMIT")
        with server.connect() as conn:
            conn.execute(sa.text("CREATE DATABASE IF NOT EXISTS galera_probe"))
            conn.execute(sa.text("CREATE TABLE IF NOT EXISTS galera_probe.beat "
                                 "(id BIGINT AUTO_INCREMENT PRIMARY KEY, at DOUBLE NOT NULL)"))
        server.dispose()
        # A new connection each time, nothing to reset (a write on a connection the node's
        # loss cut would only log the failed reset).
        self.engine = sa.create_engine(cluster.url().replace(f"/{cluster.database}",
                                                             "/galera_probe"),
                                       poolclass=sa.pool.NullPool, isolation_level="AUTOCOMMIT",
                                       pool_reset_on_return=None,
                                       connect_args={"connect_timeout": 2, "read_timeout": 10})
        self.succeeded: list[float] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                with self.engine.connect() as conn:
                    conn.execute(sa.text("INSERT INTO beat (at) VALUES (:at)"),
                                 {"at": time.time()})
                self.succeeded.append(time.monotonic())
            except sa.exc.DBAPIError:
                pass
            time.sleep(0.02)

    def __enter__(self) -> WriteProbe:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        self.thread.join()
        self.engine.dispose()

    def longest_gap_after(self, start: float, until: float) -> float:
        """The longest time without a successful write from `start` to `until`."""
        marks = [start] + [t for t in self.succeeded if start < t < until]
        later = [t for t in self.succeeded if t >= until]
        marks.append(later[0] if later else until)
        return max(b - a for a, b in zip(marks, marks[1:], strict=False))


def test_losing_a_node_under_load_loses_no_delivery_memory_or_fresh_read(
        app, echo_llm, galera_schema, users, tmp_path):
    """Two web processes and two workers, all through HAProxy (one writer); the writer, node 1,
    is killed a third of the way through the deliveries, while a user edits a memory and reads
    their context after each edit, and rejoins a third later — by IST (the missing write-sets
    from a donor's gcache), not a full copy, as its own log says. The platform redelivers what
    was not answered 202, as it does."""
    transfers_before = galera_schema.script("transfers", str(KILLED_NODE)).split()
    for user_id in LOAD_USERS:
        capture_on(app, user_id)
        last_consolidation(app, utcnow(), user_id)  # extractions only: no consolidation
    with app.app_context():
        db.session.execute(sa.insert(MemoryItem.__table__), [
            {"user_id": CAPPED_USER, "scope": "USER", "project_key": "", "status": "ACTIVE",
             "content": f"早先的事实 {n}", "source": "MANUAL",
             "dedup_hash": dedup_hash(Scope.USER, None, f"早先的事实 {n}"),
             "created_at": utcnow(), "updated_at": utcnow()}
            for n in range(ACTIVE_PER_USER_MAX - 10)])
        db.session.commit()
        db.session.remove()
    users.user("editor", user_id=EDITOR)
    editor = {"Authorization": f"Bearer {users.token('editor')}"}
    service = {"Authorization": f"Bearer {SERVICE_TOKEN}"}
    env = {"DATABASE_URL": galera_schema.url(), "REDIS_URL": TEST_REDIS_URL,
           "MEMORY_WEBHOOK_SECRET": WEBHOOK_SECRET, "MEMORY_SERVICE_TOKEN": SERVICE_TOKEN,
           "SECRET_KEY": "one-key-for-every-web-process", "MEMORY_LLM_TIMEOUT_S": "5"}
    answers: dict[str, list[int]] = {}
    accepted: dict[str, int] = {}
    stale: list[str] = []
    edits = Counter()
    progress = threading.Semaphore(0)

    with (gunicorn(tmp_path, "web-a", **env) as web_a, gunicorn(tmp_path, "web-b", **env) as web_b,
          # Forking workers, as production runs them: no horse may use a connection its worker
          # opened before the node died (SPEC §11). As many attempts as production's schedule
          # (5, 30, 120 s), shorter: a job that meets the lost node and then a certification
          # conflict while it rejoins has two more.
          worker_processes(2, tmp_path, DATABASE_URL=galera_schema.url(),
                           MEMORY_RETRY_DELAYS_S="1,2,4"),
          WriteProbe(galera_schema) as probe):
        wait_until(lambda: registered_workers() == 2, 60, "two registered workers")
        webs = (web_a.url, web_b.url)
        done = threading.Event()

        def deliver(n: int) -> None:
            user_id = LOAD_USERS[n % len(LOAD_USERS)]
            body = event(eventId=f"evt-loss-{n}", userId=user_id, sessionId=20000 + n,
                         lastUserMessage=f"第{n}号对话:以后所有的报告都请用中文来写,任务#{n}")
            for attempt in range(40):  # the platform redelivers until it is answered 202
                answer = platform.deliver(webs[(n + attempt) % 2], WEBHOOK_SECRET, body)
                answers.setdefault(body["eventId"], []).append(answer.status)
                if answer.status == 202:
                    accepted[body["eventId"]] = user_id
                    break
                time.sleep(0.25)
            progress.release()

        def sender(offset: int) -> None:
            for n in range(offset, DELIVERIES, SENDERS):
                deliver(n)
                time.sleep(PACE_S)

        def edit() -> None:
            status, created = _http("POST", f"{webs[0]}/api/v1/memory", editor,
                                    {"scope": "USER", "content": "编辑 0 号版本"})
            assert status == 201, status
            item = created["data"]["id"]
            k = 0
            while not done.is_set():
                k += 1
                status, _ = _http("PATCH", f"{webs[k % 2]}/api/v1/memory/{item}", editor,
                                  {"content": f"编辑 {k} 号版本"})
                edits[status] += 1
                if status != 200:
                    time.sleep(0.2)
                    continue
                status, block = _http(
                    "GET", f"{webs[(k + 1) % 2]}/api/v1/internal/memory/context?userId={EDITOR}",
                    service)
                edits[f"read {status}"] += 1
                if status == 200:
                    shown = [m["content"] for m in block["data"]["memories"]]
                    if shown != [f"编辑 {k} 号版本"]:
                        stale.append(f"after edit {k}: {shown}")
                time.sleep(0.05)

        editing = threading.Thread(target=edit)
        editing.start()
        senders = [threading.Thread(target=sender, args=(i,)) for i in range(SENDERS)]
        for thread in senders:
            thread.start()
        for _ in range(DELIVERIES // 3):
            progress.acquire()
        galera_schema.script("kill-node", str(KILLED_NODE))
        killed_at = time.monotonic()
        for _ in range(DELIVERIES // 3):
            progress.acquire()
        rejoin_started = time.monotonic()
        rejoin = threading.Thread(target=galera_schema.script,
                                  args=("start-node", str(KILLED_NODE)))
        rejoin.start()
        rejoin.join()
        rejoined = time.monotonic()
        # The writer takes the connections back once HAProxy sees it Synced (rise 2 x 1 s); a
        # connection may be cut as the standby's sessions are closed.
        wait_until(lambda: _writer(galera_schema) == KILLED_NODE, 30,
                   "the writer to take the connections back")
        failed_back = time.monotonic()
        for thread in senders:
            thread.join()
        done.set()
        editing.join()
        senders_done = time.monotonic()
        backlog = len(accepted) - _outcome_count(app)
        # Two workers drain what four senders queued: minutes on a busy machine (5-12 jobs/s),
        # so the wait is on progress, not a wall budget. A new outcome comes within a job's
        # timeout (66 s) plus RQ's maintenance (30 s) unless a job is lost or stuck.
        wait_for_progress(lambda: _outcome_count(app), len(accepted), OUTCOME_STALL_S,
                          "an outcome for every accepted delivery",
                          explain=lambda: missing_outcomes_report(app, list(accepted), tmp_path))
        drained = time.monotonic()
        alive = [_http("GET", f"{url}/healthz", {})[0] for url in webs]

    statuses = Counter(s for seen in answers.values() for s in seen)
    stall = probe.longest_gap_after(killed_at, rejoin_started)
    failback = probe.longest_gap_after(rejoined, failed_back + 1)
    print(f"\nnode loss: {DELIVERIES} deliveries, answers {dict(statuses)}, edits {dict(edits)};"
          f" write stall on the writer's loss {stall:.2f} s, on its return {failback:.2f} s;"
          f" node {KILLED_NODE} rejoined in {rejoined - rejoin_started:.1f} s"
          f" ({galera_schema.script('transfers', str(KILLED_NODE)).split()[-1]});"
          f" {backlog} jobs left when the last delivery was answered, done in"
          f" {drained - senders_done:.1f} s")
    assert galera_schema.script("transfers", str(KILLED_NODE)).split() == \
        [*transfers_before, "IST"], "the node rejoined by a full copy (SST), not IST"
    assert len(accepted) == DELIVERIES, "a delivery was never accepted: the service stopped"
    assert alive == [200, 200]
    done_outcomes = [o for o in outcomes(app) if o["kind"] == "extraction"]
    per_event = Counter(o["eventId"] for o in done_outcomes)
    assert set(per_event) == set(accepted) and set(per_event.values()) == {1}, \
        "every accepted delivery has exactly one outcome"
    assert {o["status"] for o in done_outcomes} == {"succeeded"}, \
        Counter((o["status"], o.get("reason")) for o in done_outcomes)
    duplicates = _query(app, "SELECT user_id, content, COUNT(*) FROM memory_item "
                             "GROUP BY user_id, content HAVING COUNT(*) > 1")
    assert duplicates == []
    learned = {(u, c) for u, c in _query(app, "SELECT user_id, content FROM memory_item "
                                               "WHERE content LIKE '第%号事实需要记住'")}
    expected = {(user_id, f"第{event_id.rsplit('-', 1)[1]}号事实需要记住")
                for event_id, user_id in accepted.items()}
    assert learned == expected, "a learned memory was lost (or one appeared from nowhere)"
    per_user = dict(_query(app, "SELECT user_id, COUNT(*) FROM memory_item WHERE status = "
                                "'ACTIVE' GROUP BY user_id"))
    assert per_user[CAPPED_USER] == ACTIVE_PER_USER_MAX
    assert max(per_user.values()) <= ACTIVE_PER_USER_MAX
    assert stale == [], stale[:5]
    assert edits[200] > 0 and edits["read 200"] > 0
    status = galera_schema.script("status")
    assert status.count("Synced,3") == 3, status


def _state(cluster: GaleraCluster, node: int) -> str | None:
    engine = sa.create_engine(cluster.url(node), poolclass=sa.pool.NullPool,
                              connect_args={"connect_timeout": 1})
    try:
        with engine.connect() as conn:
            return conn.execute(sa.text("SHOW STATUS LIKE 'wsrep_local_state_comment'")).one()[1]
    except sa.exc.DBAPIError:
        return None
    finally:
        engine.dispose()


def test_a_node_that_lost_its_state_gets_a_full_copy_by_mariabackup_and_the_donor_stays_up(
        galera_schema):
    """A node whose state is gone (a new disk: no grastate.dat) cannot be sent only what it
    missed: it gets a full copy (SST) by mariabackup, over TLS, as the SST user. mariabackup
    locks the donor only for a moment, so HAProxy's check keeps the donor in rotation while it
    is Donor/Desynced."""
    galera_schema.script("stop-node", "3")
    Path(galera_schema.env["GALERA_DIR"], "node3", "data", "grastate.dat").unlink()
    transfers = galera_schema.script("transfers", "3").split()
    donating: list[tuple[int, bool]] = []
    joined = threading.Event()

    def watch() -> None:
        while not joined.is_set():
            proxy = galera_schema.script("proxy")
            for node in (1, 2):
                if _state(galera_schema, node) == "Donor/Desynced":
                    donating.append((node, f"node{node} UP" in proxy))
            time.sleep(0.1)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        galera_schema.script("start-node", "3")
    finally:
        joined.set()
        watcher.join()
    assert galera_schema.script("transfers", "3").split() == [*transfers, "SST"]
    assert "mariabackup SST completed on joiner" in galera_schema.node_log(3)
    assert donating, "no node was seen donating"
    assert all(up for _, up in donating), donating
    assert galera_schema.script("status").count("Synced,3") == 3


# ---- total outage ---------------------------------------------------------------------------

GUIDE = ROOT / "docs" / "operations-galera.md"


def _runbook() -> list[list[str]]:
    """The commands of the guide's bootstrap-after-total-outage runbook, in order."""
    text = GUIDE.read_text(encoding="utf-8")
    section = text[text.index("### Bootstrap after a total outage"):]
    block = section[section.index("```bash") + len("```bash"):]
    block = block[:block.index("```")]
    return [line.split("#")[0].split()[1:] for line in block.strip().splitlines()]


def _beats(engine: sa.Engine) -> list[str]:
    with engine.connect() as conn:
        return list(conn.scalars(sa.text("SELECT note FROM galera_probe.outage ORDER BY note")))


def test_after_all_three_nodes_die_the_runbook_brings_the_cluster_back_with_nothing_lost(
        galera_schema):
    """The writer dies first and a row is committed on the two left; then both die. The
    guide's runbook finds the most advanced node (not the first one, whose data is older),
    bootstraps it, and the others rejoin by IST: every committed row is on every node."""
    server = sa.create_engine(galera_schema.url().replace(f"/{galera_schema.database}", "/"),
                              poolclass=sa.pool.NullPool, isolation_level="AUTOCOMMIT",
                              connect_args={"connect_timeout": 2})

    def write(note: str) -> bool:
        try:
            with server.connect() as conn:
                conn.execute(sa.text("INSERT INTO galera_probe.outage (note) VALUES (:n)"),
                             {"n": note})
            return True
        except sa.exc.DBAPIError:
            return False

    with server.connect() as conn:
        conn.execute(sa.text("CREATE DATABASE IF NOT EXISTS galera_probe"))
        conn.execute(sa.text("CREATE TABLE IF NOT EXISTS galera_probe.outage "
                             "(note VARCHAR(40) PRIMARY KEY)"))
    assert write("while all three ran")
    galera_schema.script("kill-node", "1")
    wait_until(lambda: write("after the writer died"), 30, "the standby to take the writes")
    galera_schema.script("kill-node", "3")
    galera_schema.script("kill-node", "2")

    started = time.monotonic()
    running: list[str] = []
    for command in _runbook():
        if command == ["start-node", "OTHER"]:
            command = ["start-node", next(n for n in "123" if n not in running)]
        output = galera_schema.script(*command)
        if command[0] == "bootstrap":
            running.append(output.splitlines()[-1].removeprefix("node"))
        elif command[0] == "start-node":
            running.append(command[1])
    print(f"\ntotal outage: the runbook took {time.monotonic() - started:.1f} s")

    assert running[0] in "23", "the most advanced node is one of the two that outlived node 1"
    status = galera_schema.script("status")
    assert status.count("Synced,3") == 3, status
    for node in running[1:]:
        assert galera_schema.script("transfers", node).split()[-1] == "IST"
    for node in (1, 2, 3):
        engine = sa.create_engine(galera_schema.url(node), poolclass=sa.pool.NullPool)
        assert _beats(engine) == ["after the writer died", "while all three ran"]
        engine.dispose()
    server.dispose()
