"""Form and header values → domain values: what the pages (and X-User-Id) parse the same way.

Forms and headers carry text; the domain takes enums and ids (the JSON API reads its requests
through `app.schemas`). A value that cannot be read is the usual 2001 (`InvalidInput`), named
after the parameter.
"""

from __future__ import annotations

from typing import Any

from app.errors import InvalidInput
from app.memory.rules import (
    ID_MAX,
    MANUAL_CONTENT_MAX,
    Scope,
    Status,
    reported_project_key,
)


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


def user_id(raw: str | None, name: str) -> int:
    """A platform user id: a positive integer that fits a BIGINT."""
    if raw is None or raw == "":
        raise InvalidInput("user_id_required", f"{name} is required")
    raw = raw.strip()
    if not (raw.isascii() and raw.isdigit()) or not 0 < int(raw) <= ID_MAX:
        raise InvalidInput("user_id_invalid", f"{name} must be a positive integer")
    return int(raw)


def search(value: str | None) -> str:
    """A content search as typed in a search box: trimmed, at most as long as a memory."""
    return (value or "").strip()[:MANUAL_CONTENT_MAX]


def project_filter(value: str | None) -> str:
    """A project key to narrow a list to ('' = any): refused as the API refuses it."""
    return reported_project_key((value or "").strip())
