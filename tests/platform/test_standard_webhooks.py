"""Standard Webhooks (SPEC §9): deliveries signed by the specification's own Python library are
accepted beside SPEC §5's headers; `webhook-id` is the body's `eventId`."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta

import pytest
from standardwebhooks.webhooks import Webhook

from app.extraction.models import WebhookEvent
from app.platform import signatures
from tests.completions import capture_on, event, post_webhook, queued, rows, signed_headers
from tests.conftest import (
    TEST_REDIS_URL,
    WEBHOOK_SECRET,
    _empty_tables,
    _flush_redis,
    assert_error,
    assert_ok,
)

# What the specification's libraries generate: `whsec_` and the base64 of random key bytes.
WHSEC_KEY = bytes(range(32))
WHSEC_SECRET = "whsec_" + base64.b64encode(WHSEC_KEY).decode()


def standard_headers(raw: bytes, signer: Webhook, message_id: str,
                     at: datetime | None = None) -> dict[str, str]:
    """The three headers, signed by the reference library exactly as a sender would."""
    at = at or datetime.now(tz=UTC)
    return {"webhook-id": message_id, "webhook-timestamp": str(int(at.timestamp())),
            "webhook-signature": signer.sign(message_id, at, raw)}


def deliver(client, body: dict, signer: Webhook, *, message_id: str | None = None,
            at: datetime | None = None, raw: bytes | None = None):
    raw = raw if raw is not None else json.dumps(body, ensure_ascii=False).encode()
    headers = standard_headers(raw, signer, message_id or body["eventId"], at)
    return post_webhook(client, raw, secret="", headers=headers)


@pytest.fixture
def whsec_app(make_app):
    app = make_app(MEMORY_WEBHOOK_SECRET=WHSEC_SECRET)
    _empty_tables(app)
    _flush_redis(TEST_REDIS_URL)
    return app


def test_delivery_signed_by_the_reference_library_with_a_whsec_secret_is_accepted(whsec_app):
    capture_on(whsec_app)
    body = event()
    data = assert_ok(deliver(whsec_app.test_client(), body, Webhook(WHSEC_SECRET)), 202)
    assert data == {"accepted": True, "enqueued": True, "reason": "enqueued"}
    assert [row.event_id for row in rows(whsec_app, WebhookEvent)] == [body["eventId"]]
    assert len(queued(whsec_app)) == 1


def test_a_secret_without_whsec_prefix_signs_with_its_utf8_bytes(app, client):
    capture_on(app)
    signer = Webhook(WEBHOOK_SECRET.encode("utf-8"))
    assert assert_ok(deliver(client, event(), signer), 202)["reason"] == "enqueued"


def test_the_old_headers_keep_working_with_a_whsec_secret(whsec_app):
    capture_on(whsec_app)
    status, _ = post_webhook(whsec_app.test_client(), event(), secret=WHSEC_SECRET)
    assert status == 202


def test_a_replayed_standard_delivery_is_duplicate_event(app, client):
    capture_on(app)
    body, signer = event(), Webhook(WEBHOOK_SECRET.encode())
    assert assert_ok(deliver(client, body, signer), 202)["reason"] == "enqueued"
    assert assert_ok(deliver(client, body, signer), 202)["reason"] == "duplicate_event"
    assert len(queued(app)) == 1


def test_webhook_id_other_than_the_body_event_id_is_401(app, client):
    body = event()
    refused = assert_error(deliver(client, body, Webhook(WEBHOOK_SECRET.encode()),
                                   message_id="another-id"), 401, 1001)
    assert "eventId" in refused["message"]
    assert rows(app, WebhookEvent) == []


def test_signature_with_another_key_is_401(app, client):
    assert_error(deliver(client, event(), Webhook(b"not-the-secret")), 401, 1001)
    assert rows(app, WebhookEvent) == []


def test_standard_signature_of_another_body_is_401(app, client):
    body = event()
    raw = json.dumps(body).encode()
    headers = standard_headers(raw, Webhook(WEBHOOK_SECRET.encode()), body["eventId"])
    tampered = raw.replace(b'"NORMAL"', b'"SUBAGENT"')
    assert_error(post_webhook(client, tampered, secret="", headers=headers), 401, 1001)


@pytest.mark.parametrize("skew_s", [-301, 301])
def test_standard_timestamp_more_than_300_s_off_is_401(app, client, skew_s):
    at = datetime.now(tz=UTC) + timedelta(seconds=skew_s)
    assert_error(deliver(client, event(), Webhook(WEBHOOK_SECRET.encode()), at=at), 401, 1001)


def test_one_matching_signature_among_several_is_enough(app, client):
    """A sender rotating its secret signs with both keys, space-separated."""
    capture_on(app)
    body = event()
    raw = json.dumps(body).encode()
    headers = standard_headers(raw, Webhook(WEBHOOK_SECRET.encode()), body["eventId"])
    old = Webhook(b"the-old-secret").sign(body["eventId"], datetime.now(tz=UTC), raw)
    headers["webhook-signature"] = f"{old} {headers['webhook-signature']}"
    assert_ok(post_webhook(client, raw, secret="", headers=headers), 202)


def test_a_standard_header_without_the_others_is_401(app, client):
    """A Standard Webhooks header makes it such a delivery, even beside valid old headers."""
    body = event()
    raw = json.dumps(body).encode()
    headers = {**signed_headers(raw, WEBHOOK_SECRET), "webhook-id": body["eventId"]}
    assert_error(post_webhook(client, raw, secret="", headers=headers), 401, 1001)


def test_the_service_signs_as_the_reference_library_does():
    raw = json.dumps(event()).encode()
    at = datetime.now(tz=UTC)
    stamp = str(int(at.timestamp()))
    for secret, key in ((WHSEC_SECRET, WHSEC_KEY), ("plain secret", b"plain secret")):
        assert signatures.standard_signature(secret, "msg_1", stamp, raw) == \
            Webhook(key).sign("msg_1", at, raw)
