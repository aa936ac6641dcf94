"""Form and query values → domain values: the scope, status, search and project filter the pages
read the same way the API does.

Forms carry text; the domain takes enums and its own limits (the text that knows nothing of the
domain — ids, versions, query strings — is read by `app.wire`). A value that cannot be read is
the usual 2001 (`InvalidInput`), named after the parameter.
"""

from __future__ import annotations

from typing import Any

from app.errors import InvalidInput
from app.memory.rules import MANUAL_CONTENT_MAX, Scope, Status, reported_project_key


def scope(value: Any, *, required: bool = True) -> Scope | None:
    if value in (None, "") and not required:
        return None
    try:
        return Scope(value)
    except ValueError:
        raise InvalidInput("scope_invalid", "scope must be USER or PROJECT") from None


def status(value: Any, *, required: bool = True) -> Status | None:
    if value in (None, "") and not required:
        return None
    try:
        return Status(value)
    except ValueError:
        raise InvalidInput("status_invalid", "status must be ACTIVE or DISMISSED") from None


def search(value: str | None) -> str:
    """A content search as typed in a search box: trimmed, at most as long as a memory."""
    return (value or "").strip()[:MANUAL_CONTENT_MAX]


def project_filter(value: str | None) -> str:
    """A project key to narrow a list to ('' = any): refused as the API refuses it."""
    return reported_project_key((value or "").strip())
