"""The completion webhook answered before Flask (`app.platform.fast_webhook`, issue 12): for every
delivery it answers, exactly the bytes and headers the Flask route gives, with the same record
and job; everything else goes to the route with its body intact, so refusals keep their
envelope."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Callable, Iterable
from typing import Any

import flask
import pytest
import sqlalchemy as sa
from werkzeug.test import Client

from app import envelope
from app.extensions import db
from app.extraction import intake, models
from app.extraction.models import WebhookEvent
from app.platform.fast_webhook import FastWebhook
from tests.completions import USER_ID, capture_on, event, signed_headers
from tests.conftest import WEBHOOK_SECRET, assert_error
from tests.platform.test_webhook import queued

URL = "/api/v1/webhooks/task-completed"
NOW_MS = 1_700_000_000_123


class Paths:
    """A delivery three ways: the fast path alone (falling through fails the test), the fast
    path in front of Flask (recording what it passed on), and Flask alone."""

    def __init__(self, app: flask.Flask) -> None:
        fast = app.wsgi_app.fallback  # the context read's fast path is outermost
        assert isinstance(fast, FastWebhook), "create_app installs the fast path"
        self.flask = fast.fallback
        self.passed_on: list[bytes] = []
        self.fast_only = FastWebhook(app, self._refuse)
        self.recording = FastWebhook(app, self._record)

    def _refuse(self, environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
        raise AssertionError("fell through to Flask")

    def _record(self, environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
        # What Flask gets must be the body as sent: read it back, and put it back again.
        body = environ["wsgi.input"].read()
        self.passed_on.append(body)
        environ["wsgi.input"] = io.BytesIO(body)
        return self.flask(environ, start_response)

    @staticmethod
    def post(wsgi: Callable, body: dict[str, Any] | bytes, *, secret: str = WEBHOOK_SECRET,
             headers: dict[str, str] | None = None, cookie: str | None = None
             ) -> tuple[str, list[tuple[str, str]], bytes]:
        raw = body if isinstance(body, bytes) else json.dumps(body, ensure_ascii=False).encode()
        client = Client(wsgi)
        if cookie is not None:
            client.set_cookie("session", cookie)
        response = client.post(URL, data=raw, content_type="application/json",
                               headers={**signed_headers(raw, secret), **(headers or {})})
        return (response.status, [(k, v) for k, v in response.headers if k != "Date"],
                response.get_data())


def result(answer: tuple[str, list, bytes]) -> tuple[int, Any]:
    return int(answer[0].split()[0]), json.loads(answer[2])


@pytest.fixture
def paths(app: flask.Flask, monkeypatch: pytest.MonkeyPatch) -> Paths:
    monkeypatch.setattr(envelope, "_now_ms", lambda: NOW_MS)  # one clock for both paths
    return Paths(app)


def recorded(app: flask.Flask) -> list[tuple[str, str]]:
    with app.app_context():
        found = [(row.event_id, row.reason) for row in
                 db.session.scalars(sa.select(WebhookEvent).order_by(WebhookEvent.event_id))]
        db.session.remove()
        return found


@pytest.mark.parametrize("fields, capture, reason", [
    ({}, True, models.ENQUEUED),
    ({"phase": "FAILED"}, True, models.PHASE_NOT_COMPLETED),
    ({"sessionType": "SUBAGENT"}, True, models.SESSION_TYPE_EXCLUDED),
    ({}, False, models.AUTO_CAPTURE_DISABLED),
])
def test_a_delivery_is_the_flask_routes_bytes_and_headers(app, paths, fields, capture, reason):
    capture_on(app, enabled=capture)
    fast = paths.post(paths.fast_only, event(**fields))
    slow = paths.post(paths.flask, event(**fields))
    assert fast == slow
    status, body = result(fast)
    assert (status, body["data"]["reason"]) == (202, reason)
    assert len(recorded(app)) == 2
    assert len(queued(app)) == (2 if reason == models.ENQUEUED else 0)


def test_a_repeated_delivery_is_the_same_duplicate_on_both_paths(app, paths):
    capture_on(app)
    delivery = event()
    first = paths.post(paths.fast_only, delivery)
    again_fast = paths.post(paths.fast_only, delivery)
    again_slow = paths.post(paths.flask, delivery)
    assert result(first)[1]["data"]["reason"] == models.ENQUEUED
    assert again_fast == again_slow
    assert result(again_fast)[1]["data"] == {"accepted": True, "enqueued": False,
                                             "reason": models.DUPLICATE_EVENT}
    assert len(queued(app)) == 1


@pytest.mark.parametrize("body, secret, headers, status, code", [
    (event(), "not-the-secret", None, 401, 1001),
    (event(), WEBHOOK_SECRET, {"X-Memory-Timestamp": "1000"}, 401, 1001),
    (b"{not json", WEBHOOK_SECRET, None, 400, 2001),
    (event(userId="seven"), WEBHOOK_SECRET, None, 400, 2001),
    (event(projectKey="mao\u0000"), WEBHOOK_SECRET, None, 400, 2001),
    (b"[" * 40 + b"]" * 40, WEBHOOK_SECRET, None, 400, 2001),
])
def test_a_refused_delivery_reaches_the_route_with_its_body(app, paths, body, secret, headers,
                                                           status, code):
    """A body the fast path read is put back: the route checks the same signature over it, so
    a well-signed bad body is its 400, not a 401."""
    capture_on(app)
    answer = paths.post(paths.recording, body, secret=secret, headers=headers)
    assert answer == paths.post(paths.flask, body, secret=secret, headers=headers)
    assert_error(result(answer), status, code)
    sent = body if isinstance(body, bytes) else json.dumps(body, ensure_ascii=False).encode()
    assert paths.passed_on == [sent]
    assert recorded(app) == []


def test_a_cookie_or_an_authorization_header_is_left_to_flask(app, paths):
    capture_on(app)
    for credential in ({"cookie": "x"}, {"headers": {"Authorization": "Bearer whatever"}}):
        status, body = result(paths.post(paths.recording, event(), **credential))
        assert (status, body["data"]["reason"]) == (202, models.ENQUEUED)
    assert len(paths.passed_on) == 2


def test_without_a_configured_secret_every_delivery_is_503(make_app):
    app = make_app(MEMORY_WEBHOOK_SECRET="")
    answer = Paths.post(app, event())
    assert_error(result(answer), 503, 5001)


def test_redis_down_is_the_routes_503_with_nothing_recorded_and_one_try(app, make_app,
                                                                        monkeypatch):
    capture_on(app)
    app = make_app(REDIS_URL="redis://127.0.0.1:1/0")
    tries = []
    receive = intake.receive

    def counted(delivery: intake.TaskCompleted) -> str:
        tries.append(delivery.event_id)
        return receive(delivery)

    monkeypatch.setattr(intake, "receive", counted)
    assert_error(result(Paths.post(app, event())), 503, 5001)
    assert len(tries) == 1
    assert recorded(app) == []


def test_a_bug_of_the_fast_path_is_logged_and_flask_answers(app, paths, monkeypatch, caplog):
    capture_on(app)
    real = intake.receive
    calls = []

    def broken_once(delivery: intake.TaskCompleted) -> str:
        calls.append(delivery.event_id)
        if len(calls) == 1:
            raise KeyError("a bug")
        return real(delivery)

    monkeypatch.setattr(intake, "receive", broken_once)
    with caplog.at_level(logging.ERROR):
        status, body = result(paths.post(paths.recording, event()))
    assert (status, body["data"]["reason"]) == (202, models.ENQUEUED)
    assert "webhook fast path failed" in caplog.text
    assert len(calls) == 2 and len(queued(app)) == 1


def test_a_fast_delivery_counts_in_the_metrics_what_a_flask_delivery_counts(app, paths,
                                                                           metrics):
    capture_on(app)

    def delta(wsgi: Callable) -> dict[str, float]:
        before = metrics.read()
        paths.post(wsgi, event(userId=USER_ID))
        after = metrics.read()
        return {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}

    fast, slow = delta(paths.fast_only), delta(paths.flask)
    assert fast == slow and fast
