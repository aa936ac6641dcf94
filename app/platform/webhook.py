"""The completion webhook (SPEC §5): `POST /api/v1/webhooks/task-completed`.

Authenticated by an HMAC of the raw body, not by a token, so a captured request cannot be
replayed after 300 s nor altered: SPEC §5's own headers or Standard Webhooks' (SPEC §9), both
checked by `app.platform.signatures`. `WebhookReceiver` checks the signature and the body, then
hands the event to `app.extraction.intake`, which records it and decides; it never calls the
LLM. Every finished task posts here, so it is a hot path (`app.platform.hot_path`): the
receiver answers every request on the path in front of Flask; the route below stays for the
URL map and the OpenAPI document and hands over to it.
"""

from __future__ import annotations

import json
from wsgiref.types import WSGIEnvironment

from flask import Blueprint
from werkzeug.datastructures import EnvironHeaders
from werkzeug.exceptions import RequestEntityTooLarge

from app import metrics
from app.apispec import WEBHOOK_SECURITY, answers, described, validated
from app.envelope import ApiError, ErrorCode, ok_body
from app.extraction import intake
from app.extraction.models import ENQUEUED, REASONS
from app.platform import signatures
from app.platform.hot_path import HotPath, served_by

# The SPEC §5 signature, for the benches and tests that sign as a platform does.
from app.platform.signatures import signature as signature
from app.schemas.platform import TaskCompleted, WebhookAck

bp = Blueprint("webhook", __name__, url_prefix="/api/v1/webhooks")

ENDPOINT = "webhook.task_completed"
# Per answer: its counter child, bound once (a delivery only adds 1 to it, SPEC §8 Operations),
# and the 202's data as JSON text, as compact as the envelope around it (`enqueued` follows
# from the reason).
DELIVERIES = {reason: metrics.WEBHOOK_EVENTS.labels(reason=reason) for reason in REASONS}
ACKNOWLEDGEMENTS = {reason: json.dumps({"accepted": True, "enqueued": reason == ENQUEUED,
                                        "reason": reason}, separators=(",", ":"))
                    for reason in REASONS}


def verify_signature(secret: str, environ: WSGIEnvironment, raw_body: bytes) -> bytes:
    """`raw_body`, when the delivery is authentic; else refused (401)."""
    why = signatures.why_not_authentic(secret, EnvironHeaders(environ), raw_body)
    if why is not None:
        raise ApiError(ErrorCode.UNAUTHORIZED, why)
    return raw_body


def acknowledged(reason: str) -> str:
    """The 202's data as JSON text; the delivery counted by its reason."""
    DELIVERIES[reason].inc()
    return ACKNOWLEDGEMENTS[reason]


def body_of(environ: WSGIEnvironment, limit: int) -> bytes:
    """The request body, at most `limit` bytes (else 413), as werkzeug's `get_data` reads it:
    by Content-Length, or to the end of a chunked body the server has terminated."""
    stream = environ["wsgi.input"]
    try:
        length = int(environ.get("CONTENT_LENGTH") or "")
    except ValueError:
        length = None
    if length is not None and length >= 0:
        if length > limit:
            raise RequestEntityTooLarge()
        return stream.read(length) if length else b""
    if environ.get("wsgi.input_terminated"):
        raw = stream.read(limit + 1)
        if len(raw) > limit:
            raise RequestEntityTooLarge()
        return raw
    return b""


class WebhookReceiver(HotPath):
    """`POST /api/v1/webhooks/task-completed`, every answer of it."""

    endpoint = ENDPOINT
    methods = ("POST",)

    def answer(self, environ: WSGIEnvironment) -> tuple[int, str]:
        secret = self.app.config.get("MEMORY_WEBHOOK_SECRET")
        if not secret:
            raise ApiError(ErrorCode.INTERNAL_ERROR, "the webhook is not configured "
                           "(MEMORY_WEBHOOK_SECRET is unset)", 503)
        raw = verify_signature(secret, environ,
                               body_of(environ, self.app.config["MAX_CONTENT_LENGTH"]))
        try:
            data = self.app.json.loads(raw) if raw else None
        except ValueError:
            data = None  # not JSON: refused below as "not an object", as Flask's silent read
        event = validated(TaskCompleted, data).event()
        return 202, ok_body(acknowledged(intake.receive(event)))


@bp.post("/task-completed")
def task_completed():
    """Report a finished task; extraction is enqueued when D2/D6/D9 allow.

    X-Memory-Signature is sha256=<hex HMAC-SHA256(secret, '<timestamp>.<raw body>')>; or, as
    Standard Webhooks signs, webhook-id (= the body's eventId), webhook-timestamp and
    webhook-signature v1,<base64>. The timestamp must be within 300 s. 503 when
    MEMORY_WEBHOOK_SECRET is unset or Redis is down.
    202 `{accepted, enqueued, reason}`: the session is recorded; extraction is enqueued only
    for a COMPLETED main-session task of a user with auto-capture on, once per eventId."""
    return served_by(ENDPOINT)


described(task_completed, json=TaskCompleted, tags=["platform"], security=WEBHOOK_SECURITY,
          resp=answers(202, WebhookAck, errors=(400, 401, 413, 503)))
