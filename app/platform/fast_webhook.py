"""The completion webhook, answered before Flask when the delivery is plainly valid (issue 12).

Every finished task of every agent posts here. `bench.run webhook` compares the route with a
bare WSGI function doing the same durable work (HMAC, the event row and its commit, one RQ
job); Flask's request cycle around it (request context, routing, a Response object, the
after_request hooks) was the largest part of the difference. So, like the context read's
(`fast_context`), this WSGI layer answers a `POST` on the route's own path itself, with the
route's own code and bytes:

- the signature through `signatures.not_authentic` (the timestamp window, constant-time compare),
  the body through the app's JSON provider (its depth limit) and the route's model
  `TaskCompleted` (`apispec.validated`), then `intake.receive` and `webhook.acknowledged` (the
  metric) — what the route calls;
- the body is `envelope.ok_body` around the 202's data, the headers those Flask and
  `security_headers` give the route's answer (no Cache-Control: a delivery carries no
  credential, only a signature; Vary: Cookie, as Flask says).

Anything else goes to Flask with the request as it came (the body it read is put back): another
method or path, a cookie, an Authorization header, no or an oversized Content-Length, chunked
transfer, the secret unset, a bad signature, a body that does not parse or validate, and any
exception. A dependency failure (database or Redis down) leaves nothing recorded (intake's
transaction) and is handed to the route with the request (`webhook.FAILED`), which raises it
after its own checks: the same 503 and log line, without a second try.
"""

from __future__ import annotations

import io
from wsgiref.types import WSGIEnvironment

from werkzeug.datastructures import EnvironHeaders

from app.apispec import validated
from app.envelope import ApiError, ok_body
from app.errors import DomainError
from app.extraction import intake
from app.platform.fast_path import FastPath
from app.platform.signatures import not_authentic
from app.platform.webhook import FAILED, acknowledged
from app.schemas.platform import TaskCompleted
from app.security_headers import EVERY_RESPONSE

ENDPOINT = "webhook.task_completed"
# Flask's answer to a request without credentials says it depends on the cookie (the session
# the security headers look at): the same here.
VARY = ("Vary", "Cookie")


def _body(environ: WSGIEnvironment, limit: int) -> bytes | None:
    """The body of a plain delivery, or None; a body read is put back for Flask. No cookie
    (Flask would open a browser session for it) and no Authorization (the route's answer would
    then carry no-store): the platform's deliveries carry neither."""
    if ("HTTP_COOKIE" in environ or "HTTP_AUTHORIZATION" in environ
            or "HTTP_TRANSFER_ENCODING" in environ):
        return None
    try:
        length = int(environ.get("CONTENT_LENGTH") or "")
    except ValueError:
        return None
    if not 0 < length <= limit:
        return None
    raw = environ["wsgi.input"].read(length)
    environ["wsgi.input"] = io.BytesIO(raw)
    return raw if len(raw) == length else None


class FastWebhook(FastPath):
    """A plainly valid delivery, answered in front of Flask."""

    name = "webhook"
    failed = FAILED
    endpoint = ENDPOINT
    method = "POST"
    status = "202 ACCEPTED"
    headers = (*EVERY_RESPONSE, VARY)

    def answer(self, environ: WSGIEnvironment) -> bytes | None:
        """The body of the 202 answer, or None: let Flask answer."""
        secret = self.app.config.get("MEMORY_WEBHOOK_SECRET")
        if not secret:
            return None
        raw = _body(environ, self.app.config["MAX_CONTENT_LENGTH"])
        if raw is None or not_authentic(secret, EnvironHeaders(environ), raw):
            return None
        # The domain reads its pools, queue and settings through `current_app`.
        with self.app.app_context():
            try:
                event = validated(TaskCompleted, self.app.json.loads(raw)).event()
            except (ValueError, ApiError, DomainError):
                return None  # not JSON, too deep, or refused: the route gives its 400
            return ok_body(acknowledged(intake.receive(event))).encode()
