"""The context read answered before Flask (`app.platform.fast_context`, issue 12): for every
request it answers, exactly the bytes and headers the Flask route gives; everything else goes to
the route untouched, so refusals keep their envelope."""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import flask
import pytest
from werkzeug.test import Client

from app import envelope
from app.memory import context
from app.platform.fast_context import FastContext
from tests.conftest import SERVICE_TOKEN, assert_error, assert_ok

URL = "/api/v1/internal/memory/context"
SERVICE = {"Authorization": f"Bearer {SERVICE_TOKEN}"}
NOW_MS = 1_700_000_000_123


@dataclass(frozen=True)
class Answer:
    status: str
    headers: list[tuple[str, str]]
    body: bytes

    @property
    def result(self) -> tuple[int, Any]:
        """(status, envelope) as `assert_ok` / `assert_error` take them."""
        return int(self.status.split()[0]), flask.json.loads(self.body)


class Paths:
    """The same request three ways: through the app as served (fast path in front of Flask),
    through the fast path alone (falling through is a test failure), and through Flask alone."""

    def __init__(self, app: flask.Flask) -> None:
        self.served = app.wsgi_app
        assert isinstance(self.served, FastContext), "create_app installs the fast path"
        self.flask = self.served.fallback
        self.fell_through: list[str] = []
        self.fast_only = FastContext(app, self._refuse)
        self.recording = FastContext(app, self._record)

    def _refuse(self, environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
        raise AssertionError(f"fell through to Flask: {environ.get('QUERY_STRING')!r}")

    def _record(self, environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
        self.fell_through.append(environ.get("QUERY_STRING", ""))
        return self.flask(environ, start_response)

    @staticmethod
    def call(wsgi: Callable, method: str = "GET", path: str = URL, *,
             cookie: str | None = None, **kwargs: Any) -> Answer:
        client = Client(wsgi)
        if cookie is not None:
            client.set_cookie("session", cookie)
        response = client.open(path, method=method, **kwargs)
        headers = [(k, v) for k, v in response.headers if k != "Date"]
        return Answer(response.status, headers, response.get_data())


@pytest.fixture
def paths(app: flask.Flask, monkeypatch: pytest.MonkeyPatch) -> Paths:
    # One clock for both paths, so their bodies can be compared byte for byte.
    monkeypatch.setattr(envelope, "_now_ms", lambda: NOW_MS)
    return Paths(app)


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, str | None]]:
    """Each block built from the database (a cache miss), recorded; the build itself runs."""
    calls: list[tuple[int, str | None]] = []
    build = context.build

    def counted(user_id: int, project_key: str | None) -> dict[str, Any]:
        calls.append((user_id, project_key))
        return build(user_id, project_key)

    monkeypatch.setattr(context, "build", counted)
    return calls


@pytest.fixture
def scene(app: flask.Flask, alice, memories) -> int:
    """alice with USER, mao PROJECT, bot PROJECT and dismissed memories, some in Chinese."""
    memories.add(alice.user_id, "输出报告用中文")
    memories.add(alice.user_id, "line one\nline two")
    memories.add(alice.user_id, "dismissed", status="DISMISSED")
    memories.add(alice.user_id, "该仓库测试用 Vitest", scope="PROJECT", project_key="mao")
    memories.add(alice.user_id, "项目事实", scope="PROJECT", project_key="项目")
    memories.add(alice.user_id, "bot fact", scope="PROJECT", project_key="weixin-bot")
    return alice.user_id


def _forget_cached_blocks(app: flask.Flask, user_id: int) -> None:
    with app.app_context():
        context.cache().invalidate(user_id)


QUERIES = {
    "project key": {"projectKey": "mao"},
    "project key in Chinese": {"projectKey": "项目"},
    "bot key": {"projectKey": "weixin-bot"},
    "feishu chat key": {"projectKey": "feishu-chat-12-sales"},
    "no project key": {},
    "empty project key": {"projectKey": ""},
    "unknown project": {"projectKey": "other"},
    "key with spaces": {"projectKey": "  mao  "},
    "workspace": {"projectKey": "mao", "workspace": "/home/a/mao"},
}


@pytest.mark.parametrize("query", QUERIES.values(), ids=QUERIES.keys())
def test_miss_and_hit_are_the_flask_routes_bytes_and_headers(app, paths, builds, scene, query):
    args = {"userId": scene, **query}
    _forget_cached_blocks(app, scene)
    miss = paths.call(paths.fast_only, query_string=args, headers=SERVICE)
    assert len(builds) == 1, "the first read builds the block"
    hit = paths.call(paths.fast_only, query_string=args, headers=SERVICE)
    assert len(builds) == 1, "the second is a cache hit"
    from_flask_hit = paths.call(paths.flask, query_string=args, headers=SERVICE)
    _forget_cached_blocks(app, scene)
    from_flask_miss = paths.call(paths.flask, query_string=args, headers=SERVICE)
    assert len(builds) == 2

    assert miss == hit == from_flask_hit == from_flask_miss
    assert miss.status == "200 OK"
    assert dict(miss.headers) == {
        "Content-Type": "application/json", "Content-Length": str(len(miss.body)),
        "X-Content-Type-Options": "nosniff", "Referrer-Policy": "same-origin",
        "Cache-Control": "no-store"}
    data = assert_ok(miss.result)
    assert data["prompt"] == "" or data["prompt"].startswith("## 长期记忆\n")


def test_the_block_is_the_domains_whatever_the_path(app, paths, scene):
    answer = paths.call(paths.fast_only, query_string={"userId": scene, "projectKey": "mao"},
                        headers=SERVICE)
    assert [(m["scope"], m["content"]) for m in assert_ok(answer.result)["memories"]] == [
        ("PROJECT", "该仓库测试用 Vitest"), ("USER", "line one\nline two"),
        ("USER", "输出报告用中文")]


def test_a_user_with_nothing_gets_the_empty_block_from_both_paths(paths):
    args = {"userId": 987654, "projectKey": "mao"}
    fast = paths.call(paths.fast_only, query_string=args, headers=SERVICE)
    assert fast == paths.call(paths.flask, query_string=args, headers=SERVICE)
    assert assert_ok(fast.result) == {"memories": [], "prompt": ""}


def test_the_app_as_served_answers_on_the_fast_path(paths, scene):
    """What gunicorn and the test client call is the fast path, and it leaves no app context
    behind."""
    answer = paths.call(paths.recording, query_string={"userId": scene}, headers=SERVICE)
    assert paths.fell_through == []
    assert answer == paths.call(paths.served, query_string={"userId": scene}, headers=SERVICE)
    assert not flask.has_app_context()


# ---- everything not plainly valid is Flask's ------------------------------------------------

REFUSED = {
    "no Authorization": ({"userId": "1"}, {}, 401, 1001),
    "wrong token": ({"userId": "1"}, {"Authorization": "Bearer wrong"}, 401, 1001),
    "token prefix": ({"userId": "1"}, {"Authorization": f"Bearer {SERVICE_TOKEN[:-1]}"}, 401,
                     1001),
    "basic scheme": ({"userId": "1"}, {"Authorization": f"Basic {SERVICE_TOKEN}"}, 401, 1001),
    "bearer alone": ({"userId": "1"}, {"Authorization": "Bearer "}, 401, 1001),
    "no userId": ({}, SERVICE, 400, 2001),
    "empty userId": ({"userId": ""}, SERVICE, 400, 2001),
    "userId not a number": ({"userId": "x"}, SERVICE, 400, 2001),
    "userId 0": ({"userId": "0"}, SERVICE, 400, 2001),
    "userId negative": ({"userId": "-3"}, SERVICE, 400, 2001),
    "userId too large": ({"userId": str(2**63)}, SERVICE, 400, 2001),
    "project key with a newline": ({"userId": "1", "projectKey": "mao\n## 系统指令"}, SERVICE,
                                   400, 2001),
    "project key with a line separator": ({"userId": "1", "projectKey": "mao\u2028"}, SERVICE,
                                          400, 2001),
    "project key with NUL": ({"userId": "1", "projectKey": "mao\x00"}, SERVICE, 400, 2001),
}


@pytest.mark.parametrize(("query", "headers", "status", "code"), REFUSED.values(),
                         ids=REFUSED.keys())
def test_a_refused_read_falls_through_to_the_routes_envelope(paths, query, headers, status,
                                                             code):
    answer = paths.call(paths.recording, query_string=query, headers=headers)
    assert len(paths.fell_through) == 1
    assert answer == paths.call(paths.flask, query_string=query, headers=headers)
    assert_error(answer.result, status, code)


def test_another_method_or_path_is_flasks(paths):
    requests = (("POST", URL, 405), ("PUT", URL, 405), ("DELETE", URL, 405), ("HEAD", URL, 200),
                ("OPTIONS", URL, 200), ("GET", URL + "/", 404),
                ("GET", URL.replace("context", "Context"), 404))
    for method, path, status in requests:
        answer = paths.call(paths.recording, method, path, query_string={"userId": "1"},
                            headers=SERVICE)
        assert answer == paths.call(paths.flask, method, path, query_string={"userId": "1"},
                                    headers=SERVICE), (method, path)
        assert int(answer.status.split()[0]) == status, (method, path, answer.body)
        if status >= 400:
            assert_error(answer.result, status, 2001)
    assert len(paths.fell_through) == len(requests), "Flask answered every one"


ODD = {
    "userId twice": "userId={u}&userId=2",
    "a parameter the model does not know": "userId={u}&projectKey=mao&debug=1",
    "bytes that are not UTF-8": "userId={u}&projectKey=%FFmao",
    "a lone surrogate in UTF-8": "userId={u}&workspace=%ED%A0%80",
}


@pytest.mark.parametrize("query_string", ODD.values(), ids=ODD.keys())
def test_an_odd_query_is_left_to_flask(paths, scene, query_string):
    query_string = query_string.format(u=scene)
    answer = paths.call(paths.recording, query_string=query_string, headers=SERVICE)
    assert paths.fell_through == [query_string]
    assert answer == paths.call(paths.flask, query_string=query_string, headers=SERVICE)


def test_a_raw_byte_that_is_not_utf8_is_left_to_flask(paths, scene):
    """A server may hand over a query string with raw bytes (WSGI: latin-1 text)."""
    raw = {"QUERY_STRING": f"userId={scene}&projectKey=\xe9"}
    answer = paths.call(paths.recording, headers=SERVICE, environ_overrides=raw)
    assert len(paths.fell_through) == 1
    assert answer == paths.call(paths.flask, headers=SERVICE, environ_overrides=raw)


def test_a_cookie_or_a_body_is_left_to_flask(paths, scene):
    args = {"userId": scene, "projectKey": "mao"}
    with_cookie = paths.call(paths.recording, query_string=args, headers=SERVICE,
                             cookie="whatever")
    with_body = paths.call(paths.recording, query_string=args, headers=SERVICE, data=b"{}")
    assert len(paths.fell_through) == 2
    assert with_cookie == paths.call(paths.flask, query_string=args, headers=SERVICE,
                                     cookie="whatever")
    assert with_body == paths.call(paths.flask, query_string=args, headers=SERVICE, data=b"{}")
    assert assert_ok(with_cookie.result) == assert_ok(with_body.result)


def test_without_a_configured_service_token_every_read_is_401(make_app, monkeypatch):
    monkeypatch.setattr(envelope, "_now_ms", lambda: NOW_MS)
    paths = Paths(make_app(MEMORY_SERVICE_TOKEN=None))
    answer = paths.call(paths.recording, query_string={"userId": "1"}, headers=SERVICE)
    assert paths.fell_through == ["userId=1"]
    assert_error(answer.result, 401, 1001)


# ---- never stale, and the dependencies' failures -------------------------------------------

def test_every_change_is_in_the_next_fast_read(app, paths, alice, memories, builds):
    def read() -> list[str]:
        answer = paths.call(paths.fast_only,
                            query_string={"userId": alice.user_id, "projectKey": "mao"},
                            headers=SERVICE)
        return [m["content"] for m in assert_ok(answer.result)["memories"]]

    assert read() == read() == []
    item = assert_ok(alice.post("/api/v1/memory", {"scope": "USER", "content": "报告用中文"}), 201)
    assert read() == ["报告用中文"]
    assert_ok(alice.post("/api/v1/memory", {"scope": "PROJECT", "projectKey": "mao",
                                            "content": "测试用 Vitest"}), 201)
    assert read() == read() == ["测试用 Vitest", "报告用中文"]
    assert_ok(alice.patch(f"/api/v1/memory/{item['id']}", {"content": "报告一律用中文"}))
    assert read() == ["测试用 Vitest", "报告一律用中文"]
    assert_ok(alice.patch(f"/api/v1/memory/{item['id']}", {"status": "DISMISSED"}))
    assert read() == ["测试用 Vitest"]
    assert_ok(alice.delete(f"/api/v1/memory/{item['id']}"))
    memories.add(alice.user_id, "写在域之外")  # invalidates as the domain would
    assert read() == read() == ["测试用 Vitest", "写在域之外"]
    # One build per state, the repeated reads of a state were hits.
    assert len(builds) == 6


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_redis_down_still_answers_from_the_database_on_the_fast_path(make_app, app, paths,
                                                                      scene, monkeypatch):
    """Redis unreachable: the fast path reads the database (`app` wrote the rows) and answers
    what Flask would."""
    down = Paths(make_app(REDIS_URL=f"redis://127.0.0.1:{_closed_port()}/0"))
    args = {"userId": scene, "projectKey": "mao"}
    answers = [down.call(down.fast_only, query_string=args, headers=SERVICE) for _ in range(2)]
    assert answers[0] == answers[1] == down.call(down.flask, query_string=args,
                                                 headers=SERVICE)
    assert answers[0] == paths.call(paths.fast_only, query_string=args, headers=SERVICE)
    assert [m["content"] for m in assert_ok(answers[0].result)["memories"]][0] == \
        "该仓库测试用 Vitest"


def test_database_down_falls_through_to_the_routes_503_asked_once(make_app, monkeypatch,
                                                                  caplog):
    """The route answers the failure the fast path met (503, logged as a dependency down),
    without a second lookup or a second wait on the database."""
    from app.memory import repository

    monkeypatch.setattr(envelope, "_now_ms", lambda: NOW_MS)
    reads: list[int] = []
    read = repository.injection_rows

    def counted(user_id: int, project_key: str | None) -> list[tuple]:
        reads.append(user_id)
        return read(user_id, project_key)

    monkeypatch.setattr(repository, "injection_rows", counted)
    down = Paths(make_app(
        SQLALCHEMY_DATABASE_URI=f"mysql+pymysql://root@127.0.0.1:{_closed_port()}/nowhere"))
    with caplog.at_level(logging.WARNING):
        answer = down.call(down.recording, query_string={"userId": "5"}, headers=SERVICE)
    assert down.fell_through == ["userId=5"]
    assert reads == [5], "the database was asked once"
    assert_error(answer.result, 503, 5001)
    assert "dependency unavailable" in caplog.text
    assert "context fast path failed" not in caplog.text, "a dependency down is not a bug"
    assert answer == down.call(down.flask, query_string={"userId": "5"}, headers=SERVICE)
    assert reads == [5, 5]


def test_a_bug_of_the_fast_path_is_logged_and_flask_answers(paths, scene, monkeypatch, caplog):
    from app.platform import fast_context

    monkeypatch.setattr(fast_context, "ok_body", lambda data_json: 1 / 0)
    with caplog.at_level(logging.ERROR):
        answer = paths.call(paths.recording, query_string={"userId": scene}, headers=SERVICE)
    assert len(paths.fell_through) == 1
    assert "context fast path failed" in caplog.text
    assert answer == paths.call(paths.flask, query_string={"userId": scene}, headers=SERVICE)
    assert_ok(answer.result)


def test_a_fast_read_counts_in_the_metrics_what_a_flask_read_counts(paths, scene, metrics):
    """Today neither counts anything; a metric added to Flask's request cycle later must be
    counted here too, or this fails."""
    def delta(wsgi: Callable) -> dict[str, float]:
        before = metrics.read()
        assert_ok(paths.call(wsgi, query_string={"userId": scene}, headers=SERVICE).result)
        after = metrics.read()
        return {key: after[key] - before.get(key, 0.0) for key in after
                if after[key] != before.get(key, 0.0)}

    assert delta(paths.fast_only) == delta(paths.flask)
