"""The refusal of a page request without this session's CSRF token: the account pages' and every
other HTML blueprint's (`app.pages.require_login`)."""

from __future__ import annotations

from flask import Response

from app import messages
from app.htmx import error_response


def csrf_refused() -> Response:
    """A form or htmx request without this session's CSRF token."""
    return error_response(403, "页面已过期", messages.REASONS[messages.CSRF_INVALID])
