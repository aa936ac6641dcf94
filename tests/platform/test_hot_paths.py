"""The platform's two hot paths, each answered by the one endpoint that owns its path
(`app.platform.hot_path`): every answer — success, every refusal, OPTIONS, 405, a dependency down,
a bug — comes from it, and nothing is answered a second time by another implementation."""

from __future__ import annotations

import io
import json
import logging
import socket

import flask
import pytest
from werkzeug.test import Client

from app.extraction import intake
from app.platform import webhook
from app.platform.api import ContextRead
from app.platform.hot_path import HotPaths
from app.platform.webhook import WebhookReceiver
from tests.completions import USER_ID, capture_on, event, signed_headers
from tests.conftest import SERVICE_TOKEN, WEBHOOK_SECRET, assert_error, assert_ok

CONTEXT = "/api/v1/internal/memory/context"
WEBHOOK = "/api/v1/webhooks/task-completed"
SERVICE = {"Authorization": f"Bearer {SERVICE_TOKEN}"}


def result(response) -> tuple[int, dict]:
    return response.status_code, json.loads(response.get_data())


def post(client, body, *, secret: str = WEBHOOK_SECRET, **kwargs):
    raw = body if isinstance(body, bytes) else json.dumps(body, ensure_ascii=False).encode()
    return client.post(WEBHOOK, data=raw, headers=signed_headers(raw, secret), **kwargs)


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_the_served_app_sends_the_two_paths_to_their_endpoints(app):
    served = app.wsgi_app.app  # inside the request ids' middleware (app.logs)
    assert isinstance(served, HotPaths)
    assert {type(e) for e in served.endpoints.values()} == {ContextRead, WebhookReceiver}
    assert set(served.endpoints) == {CONTEXT, WEBHOOK}


def test_the_flask_route_hands_its_request_to_the_same_endpoint(app, alice, memories):
    """A request that reached Flask for the path (not through the dispatcher) gets the answer
    of the same endpoint."""
    memories.add(alice.user_id, "输出报告用中文")
    through_flask = Client(app.wsgi_app.app.flask).get(CONTEXT, query_string={
        "userId": alice.user_id}, headers=SERVICE)
    served = app.test_client().get(CONTEXT, query_string={"userId": alice.user_id},
                                   headers=SERVICE)
    assert assert_ok(result(through_flask)) == assert_ok(result(served))


REFUSED_READS = {
    "no token": ({"userId": "5"}, {}, 401, 1001),
    "wrong token": ({"userId": "5"}, {"Authorization": "Bearer nope"}, 401, 1001),
    "no userId": ({}, SERVICE, 400, 2001),
    "userId not a number": ({"userId": "five"}, SERVICE, 400, 2001),
    "control character in projectKey": ({"userId": "5", "projectKey": "a\x01"}, SERVICE, 400,
                                        2001),
}


@pytest.mark.parametrize(("query", "headers", "status", "code"), REFUSED_READS.values(),
                         ids=REFUSED_READS.keys())
def test_every_refused_context_read_is_an_envelope(app, query, headers, status, code):
    assert_error(result(app.test_client().get(CONTEXT, query_string=query, headers=headers)),
                 status, code)


def test_a_context_query_that_is_not_utf8_is_refused(app):
    response = app.test_client().get(CONTEXT + "?userId=5&projectKey=%FF", headers=SERVICE)
    assert_error(result(response), 400, 2001)


@pytest.mark.parametrize(("path", "method", "allow"), [
    (CONTEXT, "POST", "GET, HEAD, OPTIONS"), (CONTEXT, "DELETE", "GET, HEAD, OPTIONS"),
    (WEBHOOK, "GET", "OPTIONS, POST"), (WEBHOOK, "PUT", "OPTIONS, POST")])
def test_another_method_is_405_with_allow(app, path, method, allow):
    response = app.test_client().open(path, method=method, headers=SERVICE)
    assert_error(result(response), 405, 2001)
    assert response.headers["Allow"] == allow


@pytest.mark.parametrize(("path", "allow"), [(CONTEXT, "GET, HEAD, OPTIONS"),
                                             (WEBHOOK, "OPTIONS, POST")])
def test_options_names_the_methods(app, path, allow):
    response = app.test_client().options(path)
    assert response.status_code == 200 and response.headers["Allow"] == allow


def test_head_of_the_context_read_has_the_headers_and_no_body(app, alice):
    response = app.test_client().head(CONTEXT, query_string={"userId": alice.user_id},
                                      headers=SERVICE)
    assert response.status_code == 200 and response.get_data() == b""
    assert int(response.headers["Content-Length"]) > 0


def test_a_read_with_credentials_is_not_stored_and_one_without_varies_on_the_cookie(app, alice):
    client = app.test_client()
    answered = client.get(CONTEXT, query_string={"userId": alice.user_id}, headers=SERVICE)
    assert answered.headers["Cache-Control"] == "no-store"
    assert answered.headers["X-Content-Type-Options"] == "nosniff"
    refused = client.get(CONTEXT, query_string={"userId": alice.user_id})
    assert refused.headers["Vary"] == "Cookie" and "Cache-Control" not in refused.headers


REFUSED_DELIVERIES = {
    "bad signature": (event(), "wrong-secret", 401, 1001),
    "not JSON": (b"{not json", WEBHOOK_SECRET, 400, 2001),
    "not an object": (b"[1, 2]", WEBHOOK_SECRET, 400, 2001),
    "no eventId": ({k: v for k, v in event().items() if k != "eventId"}, WEBHOOK_SECRET, 400,
                   2001),
    "too deep": (b"[" * 40 + b"]" * 40, WEBHOOK_SECRET, 400, 2001),
}


@pytest.mark.parametrize(("body", "secret", "status", "code"), REFUSED_DELIVERIES.values(),
                         ids=REFUSED_DELIVERIES.keys())
def test_every_refused_delivery_is_an_envelope_and_records_nothing(app, body, secret, status,
                                                                   code, monkeypatch):
    received = []
    monkeypatch.setattr(intake, "receive", lambda e: received.append(e))
    assert_error(result(post(app.test_client(), body, secret=secret)), status, code)
    assert received == []


def test_an_oversized_delivery_is_413(make_app):
    service = make_app(MAX_CONTENT_LENGTH=1024)
    body = event(lastUserMessage="长" * 2000)
    assert_error(result(post(service.test_client(), body)), 413, 2001)


def test_a_chunked_delivery_is_read_to_its_end(app):
    capture_on(app)
    raw = json.dumps(event(eventId="evt-chunked")).encode()
    response = app.test_client().post(
        WEBHOOK, input_stream=io.BytesIO(raw), headers={
            **signed_headers(raw, WEBHOOK_SECRET), "Transfer-Encoding": "chunked"},
        environ_overrides={"wsgi.input_terminated": True})
    assert assert_ok(result(response), 202)["reason"] == "enqueued"


def test_without_a_configured_secret_every_delivery_is_503(make_app):
    service = make_app(MEMORY_WEBHOOK_SECRET=None)
    assert_error(result(post(service.test_client(), event())), 503, 5001)


def test_a_failure_after_the_delivery_committed_is_answered_once(app, monkeypatch, caplog):
    """Nothing runs the delivery again after it was recorded: a bug past that point is a 500,
    and the platform's retry of it is the duplicate it is."""
    capture_on(app)
    calls = []
    receive = intake.receive

    def counted(e):
        calls.append(e.event_id)
        return receive(e)

    monkeypatch.setattr(intake, "receive", counted)
    monkeypatch.setattr(webhook, "acknowledged", lambda reason: 1 / 0)
    body = event(eventId="evt-bug-after-commit")
    with caplog.at_level(logging.ERROR):
        assert_error(result(post(app.test_client(), body)), 500, 5001)
    assert calls == ["evt-bug-after-commit"]
    assert "event=request.unhandled_error" in caplog.text
    monkeypatch.undo()
    assert assert_ok(result(post(app.test_client(), body)), 202)["reason"] == "duplicate_event"


def test_a_database_down_is_a_503_asked_once(make_app, monkeypatch, caplog):
    from app.memory import repository

    reads = []
    read = repository.injection_rows

    def counted(user_id, project_key):
        reads.append(user_id)
        return read(user_id, project_key)

    monkeypatch.setattr(repository, "injection_rows", counted)
    down = make_app(
        SQLALCHEMY_DATABASE_URI=f"mysql+pymysql://root@127.0.0.1:{_closed_port()}/nowhere")
    with caplog.at_level(logging.WARNING):
        response = down.test_client().get(CONTEXT, query_string={"userId": "5"},
                                          headers=SERVICE)
    assert_error(result(response), 503, 5001)
    # The cache key's namespace (the installation id, read once per process) is the first read
    # and fails: the injection read is not tried after it, nothing is asked twice.
    assert reads == []
    assert "event=request.dependency_unavailable" in caplog.text


def test_a_hook_of_the_flask_app_does_not_run_for_the_hot_paths(app, make_app):
    """What the platform's traffic needs it does itself; a `before_request` added to the app
    is not silently expected to run for it."""
    fresh = make_app()
    seen = []
    fresh.before_request(lambda: seen.append(flask.request.path))
    fresh.test_client().get(CONTEXT, query_string={"userId": "5"}, headers=SERVICE)
    fresh.test_client().get("/healthz")
    assert seen == ["/healthz"]


def test_a_delivery_for_a_user_first_seen_creates_the_user_once(app):
    body = event(eventId="evt-new-user", userId=USER_ID + 1000)
    assert assert_ok(result(post(app.test_client(), body)), 202)["reason"] == \
        "auto_capture_disabled"
