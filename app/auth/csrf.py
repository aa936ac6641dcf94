"""CSRF protection for cookie-authenticated unsafe requests.

A random token lives in the signed session; pages send it back as the `csrf_token` form field
or the `X-CSRF-Token` header (htmx sets it once on <body>). Bearer-token calls carry no ambient
credential, so they need none.
"""

from __future__ import annotations

import hmac
import secrets

from flask import request, session

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
SESSION_KEY = "csrf"
HEADER = "X-CSRF-Token"
FORM_FIELD = "csrf_token"


def token() -> str:
    """This session's token, created on first use."""
    value = session.get(SESSION_KEY)
    if not isinstance(value, str):
        value = secrets.token_urlsafe(32)
        session[SESSION_KEY] = value
    return value


def request_token_valid() -> bool:
    expected = session.get(SESSION_KEY)
    sent = request.headers.get(HEADER)
    if sent is None and request.mimetype in ("application/x-www-form-urlencoded",
                                              "multipart/form-data"):
        sent = request.form.get(FORM_FIELD)
    if not isinstance(expected, str) or not sent:
        return False
    return hmac.compare_digest(expected.encode("utf-8"), sent.encode("utf-8"))
