"""Who signed a completion delivery: the one check every path answering the webhook calls.

Two schemes are accepted, chosen by the headers a delivery carries:

- the service's own (SPEC §5): `X-Memory-Timestamp: <unix seconds>` and
  `X-Memory-Signature: sha256=<hex HMAC-SHA256(secret, "<timestamp>.<raw body>")>`, keyed by the
  secret's UTF-8 bytes;
- Standard Webhooks (SPEC §9, https://www.standardwebhooks.com): `webhook-id`,
  `webhook-timestamp` and `webhook-signature: v1,<base64 HMAC-SHA256(key,
  "<id>.<timestamp>.<raw body>")>` (several space-separated, so a sender can rotate its secret),
  keyed by the base64 after `whsec_` when the secret is written that way, else by its UTF-8
  bytes. So an integrator signs with the specification's maintained libraries instead of
  writing our HMAC; `webhook-id` must be the body's `eventId`, the key idempotency rests on.

Either way the timestamp must be within 300 s of now, so a captured delivery cannot be replayed
later, and every comparison is constant-time.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
from collections.abc import Mapping

SIGNATURE_HEADER = "X-Memory-Signature"
TIMESTAMP_HEADER = "X-Memory-Timestamp"
STANDARD_ID = "webhook-id"
STANDARD_TIMESTAMP = "webhook-timestamp"
STANDARD_SIGNATURE = "webhook-signature"
STANDARD_HEADERS = (STANDARD_ID, STANDARD_TIMESTAMP, STANDARD_SIGNATURE)
SECRET_PREFIX = "whsec_"
MAX_SKEW_S = 300


def signature(secret: str, timestamp: str, raw_body: bytes) -> str:
    """SPEC §5: `sha256=<hex HMAC-SHA256(secret, "<timestamp>.<raw body>")>`."""
    digest = hmac.new(secret.encode("utf-8"), timestamp.encode("ascii") + b"." + raw_body,
                      hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def standard_key(secret: str) -> bytes:
    """The HMAC key of Standard Webhooks: `whsec_<base64>` is that base64's bytes (what the
    specification's libraries generate and expect); any other secret is its UTF-8 bytes, so an
    installation keeps the secret it has."""
    if secret.startswith(SECRET_PREFIX):
        encoded = secret[len(SECRET_PREFIX):]
        try:
            key = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
        except binascii.Error:
            key = b""
        if key:
            return key
    return secret.encode("utf-8")


def standard_signature(secret: str, message_id: str, timestamp: str, raw_body: bytes) -> str:
    """Standard Webhooks: `v1,<base64 HMAC-SHA256(key, "<id>.<timestamp>.<raw body>")>`."""
    signed = f"{message_id}.{timestamp}.".encode() + raw_body
    digest = hmac.new(standard_key(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode("ascii")


def _stale(timestamp: str, header: str) -> str | None:
    """Why the timestamp header's value is refused, or None."""
    if not (timestamp.isascii() and timestamp.isdigit()) or len(timestamp) > 12:
        return f"{header} must be unix seconds"
    if abs(time.time() - int(timestamp)) > MAX_SKEW_S:
        return f"{header} is more than {MAX_SKEW_S} s off"
    return None


def _event_id(raw_body: bytes) -> object:
    """The body's eventId, or None when the body is no JSON object (the route then says why)."""
    try:
        body = json.loads(raw_body)
    except (ValueError, RecursionError):
        return None
    return body.get("eventId") if isinstance(body, dict) else None


def _standard(secret: str, headers: Mapping[str, str], raw_body: bytes) -> str | None:
    message_id = headers.get(STANDARD_ID, "").strip()
    timestamp = headers.get(STANDARD_TIMESTAMP, "").strip()
    if not message_id:
        return f"bad or missing {STANDARD_ID}"
    why = _stale(timestamp, STANDARD_TIMESTAMP)
    if why is not None:
        return why
    expected = standard_signature(secret, message_id, timestamp, raw_body).encode()
    given = headers.get(STANDARD_SIGNATURE, "").split()
    # Every candidate is compared, so the time taken does not say which one matched.
    if not sum(hmac.compare_digest(expected, candidate.encode("utf-8")) for candidate in given):
        return f"bad or missing {STANDARD_SIGNATURE}"
    if _event_id(raw_body) != message_id:
        return f"{STANDARD_ID} must equal the body's eventId"
    return None


def why_not_authentic(secret: str, headers: Mapping[str, str], raw_body: bytes) -> str | None:
    """Why a delivery is not authentic, or None. `headers` looks names up case-insensitively
    (werkzeug's `Headers` / `EnvironHeaders`). A delivery carrying any Standard Webhooks header
    is checked as one; any other by SPEC §5's headers."""
    if any(name in headers for name in STANDARD_HEADERS):
        return _standard(secret, headers, raw_body)
    why = _stale(headers.get(TIMESTAMP_HEADER, "").strip(), TIMESTAMP_HEADER)
    if why is not None:
        return why
    expected = signature(secret, headers.get(TIMESTAMP_HEADER, "").strip(), raw_body)
    if not hmac.compare_digest(headers.get(SIGNATURE_HEADER, "").strip().encode("utf-8"),
                               expected.encode("utf-8")):
        return f"bad or missing {SIGNATURE_HEADER}"
    return None
