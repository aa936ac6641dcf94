"""The completion webhook (SPEC §5): `POST /api/v1/webhooks/task-completed`.

Authenticated by an HMAC of the raw body, not by a token, so a captured request cannot be
replayed after 300 s nor altered: SPEC §5's own headers or Standard Webhooks' (SPEC §9), both
checked by `app.platform.signatures`. The route checks the signature and the body, then hands the
event to `app.extraction.intake`, which records it and decides; it never calls the LLM.
"""

from __future__ import annotations

import json

from flask import Blueprint, current_app, request

from app import metrics
from app.apispec import WEBHOOK_SECURITY, answers, described, validated
from app.envelope import ApiError, ErrorCode, ok_encoded
from app.extraction import intake
from app.extraction.models import ENQUEUED, REASONS
from app.platform import signatures

# The SPEC §5 signature, for the benches and tests that sign as a platform does.
from app.platform.signatures import signature as signature
from app.schemas.platform import TaskCompleted, WebhookAck

bp = Blueprint("webhook", __name__, url_prefix="/api/v1/webhooks")

# The environ key of a dependency failure the fast path (`app.platform.fast_webhook`) met (a WSGI
# server never puts a dotted key there from a request: headers arrive as HTTP_*).
FAILED = "memory.fast_webhook.failed"
# Per answer: its counter child, bound once (a delivery only adds 1 to it, SPEC §8 Operations),
# and the 202's data as JSON text, as compact as the envelope around it (`enqueued` follows
# from the reason).
DELIVERIES = {reason: metrics.WEBHOOK_EVENTS.labels(reason=reason) for reason in REASONS}
ACKNOWLEDGEMENTS = {reason: json.dumps({"accepted": True, "enqueued": reason == ENQUEUED,
                                        "reason": reason}, separators=(",", ":"))
                    for reason in REASONS}


def _verify_signature() -> None:
    secret = current_app.config.get("MEMORY_WEBHOOK_SECRET")
    if not secret:
        raise ApiError(ErrorCode.INTERNAL_ERROR, "the webhook is not configured "
                       "(MEMORY_WEBHOOK_SECRET is unset)", 503)
    why = signatures.not_authentic(secret, request.headers, request.get_data(cache=True))
    if why is not None:
        raise ApiError(ErrorCode.UNAUTHORIZED, why)


def acknowledged(reason: str) -> str:
    """The 202's data as JSON text; the delivery counted by its reason."""
    DELIVERIES[reason].inc()
    return ACKNOWLEDGEMENTS[reason]


@bp.post("/task-completed")
def task_completed():
    """Report a finished task; extraction is enqueued when D2/D6/D9 allow.

    X-Memory-Signature is sha256=<hex HMAC-SHA256(secret, '<timestamp>.<raw body>')>; or, as
    Standard Webhooks signs, webhook-id (= the body's eventId), webhook-timestamp and
    webhook-signature v1,<base64>. The timestamp must be within 300 s. 503 when
    MEMORY_WEBHOOK_SECRET is unset or Redis is down.
    202 `{accepted, enqueued, reason}`: the session is recorded; extraction is enqueued only
    for a COMPLETED main-session task of a user with auto-capture on, once per eventId."""
    _verify_signature()
    body = validated(TaskCompleted, request.get_json(force=True, silent=True))
    failed = request.environ.get(FAILED)
    if failed is not None:
        # The fast path in front of Flask met a dependency down on this very delivery (and
        # recorded nothing): the same 503, without trying again.
        raise failed
    return ok_encoded(acknowledged(intake.receive(body.event())), 202)


# The hot path validates with its model directly: only described, never wrapped.
described(task_completed, json=TaskCompleted, tags=["platform"], security=WEBHOOK_SECURITY,
          resp=answers(202, WebhookAck, errors=(400, 401, 413, 503)))
