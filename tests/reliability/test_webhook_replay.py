"""The webhook against replays and clocks: a captured delivery sent again enqueues nothing, and
a timestamp more than 300 s from the server's clock is refused whichever way it is off.
"""

from __future__ import annotations

import json
import math
import time

import pytest
import redis
import sqlalchemy as sa
from flask import Flask
from rq import Queue

from app.extensions import db
from app.extraction.models import WebhookEvent
from app.sessions.models import PlatformSession
from tests.completions import capture_on, queue_name
from tests.reliability.conftest import WEBHOOK_PATH, deliver, envelope_error, signed
from tests.reliability.routes import webhook_event

USER_ID = 4242


def queued_jobs(app: Flask) -> int:
    connection = redis.Redis.from_url(app.config["REDIS_URL"])
    try:
        return Queue(queue_name(app), connection=connection).count
    finally:
        connection.close()


def recorded(app: Flask) -> tuple[int, int]:
    """(webhook_event rows, session rows)."""
    with app.app_context():
        events = db.session.scalar(sa.select(sa.func.count()).select_from(WebhookEvent))
        sessions = db.session.scalar(sa.select(sa.func.count()).select_from(PlatformSession))
        db.session.remove()
        return events, sessions


@pytest.fixture
def capturing(app: Flask) -> None:
    capture_on(app, USER_ID)


def test_a_replayed_delivery_is_a_duplicate_and_enqueues_nothing(app, client, capturing):
    raw = json.dumps(webhook_event(eventId="evt-replayed")).encode()
    headers = signed(raw)
    first = client.post(WEBHOOK_PATH, data=raw, content_type="application/json",
                        headers=headers)
    assert first.status_code == 202
    assert first.get_json()["data"] == {"accepted": True, "enqueued": True,
                                        "reason": "enqueued"}
    # The very same bytes and headers, as an attacker who captured them would send them.
    for _ in range(3):
        again = client.post(WEBHOOK_PATH, data=raw, content_type="application/json",
                            headers=headers)
        assert again.status_code == 202
        assert again.get_json()["data"] == {"accepted": True, "enqueued": False,
                                            "reason": "duplicate_event"}
    assert queued_jobs(app) == 1
    assert recorded(app) == (1, 1)


def test_a_retry_signed_anew_is_still_a_duplicate(app, client, capturing):
    """The platform retrying with a fresh timestamp gets the same answer as a replay."""
    body = webhook_event(eventId="evt-retried")
    assert deliver(client, body).get_json()["data"]["enqueued"] is True
    retried = deliver(client, body, timestamp=int(time.time()) + 5)
    assert retried.get_json()["data"]["reason"] == "duplicate_event"
    assert queued_jobs(app) == 1


@pytest.mark.parametrize("direction", [-1, 1], ids=["old", "ahead"])
def test_a_timestamp_301_s_off_is_401_and_records_nothing(app, client, capturing, direction):
    # Rounded away from now, so the request is at least 301 s off when it arrives.
    now = time.time()
    stamp = (math.floor(now) - 301) if direction < 0 else (math.ceil(now) + 301)
    response = deliver(client, webhook_event(eventId=f"evt-skew-{direction}"), timestamp=stamp)
    envelope_error(response, 401, 1001)
    assert recorded(app) == (0, 0) and queued_jobs(app) == 0


@pytest.mark.parametrize("direction", [-1, 1], ids=["old", "ahead"])
def test_a_timestamp_299_s_off_is_accepted(app, client, capturing, direction):
    # Rounded towards now, so the request is at most 299 s off when it arrives.
    now = time.time()
    stamp = (math.ceil(now) - 299) if direction < 0 else (math.floor(now) + 299)
    response = deliver(client, webhook_event(eventId=f"evt-in-time-{direction}"),
                       timestamp=stamp)
    assert response.status_code == 202, response.text
    assert response.get_json()["data"]["enqueued"] is True


def test_a_replay_of_a_refused_delivery_is_refused_again(app, client, capturing):
    """A skewed delivery recorded nothing, so replaying it cannot sneak past the check."""
    raw = json.dumps(webhook_event(eventId="evt-stale")).encode()
    headers = signed(raw, int(time.time()) - 3600)
    for _ in range(2):
        response = client.post(WEBHOOK_PATH, data=raw, content_type="application/json",
                               headers=headers)
        envelope_error(response, 401, 1001)
    assert recorded(app) == (0, 0) and queued_jobs(app) == 0
