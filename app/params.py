"""Request values → domain values: what every route (JSON API and pages) parses the same way.

Query strings and forms carry text; the domain takes enums, ids and page requests. A value that
cannot be read is the usual 2001 (`InvalidInput`), named after the parameter.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.errors import InvalidInput
from app.memory.repository import Filters
from app.memory.rules import ID_MAX, MANUAL_CONTENT_MAX, Scope, Status
from app.paging import DEFAULT_SIZE, PageRequest


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


def search(value: Any) -> str | None:
    """`q`: a substring of the content to look for; empty means no search."""
    if value in (None, ""):
        return None
    if not isinstance(value, str) or len(value) > MANUAL_CONTENT_MAX:
        raise InvalidInput("search_invalid",
                           f"q must be a text of at most {MANUAL_CONTENT_MAX} characters")
    return value


def filters(args: Mapping[str, Any], *, project_key: bool = True) -> Filters:
    """scope, projectKey (when allowed), status and q of a memory list."""
    key = args.get("projectKey") if project_key else None
    return Filters(scope=scope(args.get("scope"), required=False),
                   project_key=key.strip() if key else None,
                   status=status(args.get("status"), required=False),
                   q=search(args.get("q")))


def page_request(args: Mapping[str, Any], default_size: int = DEFAULT_SIZE) -> PageRequest:
    return PageRequest.parse(args.get("page"), args.get("pageSize"), default_size)
