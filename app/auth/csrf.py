"""The refusal of a page request without this session's CSRF token: the account pages' and every
other HTML blueprint's (`app.pages.require_login`).

Its sentence lives here, below the domain, and `app.messages` lists it with the rest: the
account pages must not import the table that knows every domain refusal."""

from __future__ import annotations

from flask import Response

from app.htmx import error_response

# The page's own refusal of an unsafe request without the session's CSRF token.
CSRF_INVALID = "csrf_invalid"
CSRF_SENTENCE = "页面已过期:请刷新页面后再试。"


def csrf_refused() -> Response:
    """A form or htmx request without this session's CSRF token."""
    return error_response(403, "页面已过期", CSRF_SENTENCE)
