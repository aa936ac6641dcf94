"""User JSON API (SPEC §4, seed §5.3): a user's own memories, auto-capture switch, projects."""

from __future__ import annotations

from flask import Blueprint, Response, request

from app import wire
from app.apispec import USER_SECURITY, answers, api, with_etag
from app.auth.identity import current_user_id, user_api
from app.envelope import conflict, ok, ok_encoded
from app.errors import VersionConflict
from app.memory import access_log as access
from app.memory import service
from app.memory.access_log import Access
from app.memory.models import MemoryItem
from app.memory.repository import Filters
from app.paging import PageRequest
from app.schemas import Envelope, PageQuery
from app.schemas.memory import (
    AccessPage,
    AutoCapture,
    MemoryChange,
    MemoryContext,
    MemoryEvent,
    MemoryItemOut,
    MemoryListQuery,
    MemoryPage,
    NewMemory,
    Preconditions,
    PreviewQuery,
    Projects,
)
from app.schemas.memory import VersionConflict as VersionConflictOut

bp = Blueprint("user_api", __name__, url_prefix="/api/v1/memory")


def _documented(status: int, data: object, errors: tuple[int, ...], *,
               preconditions: bool = False):
    """The route's schemas; `preconditions`: it takes If-Match and may answer 412."""
    return api.validate(
        resp=answers(status, data, errors=errors,
                     conflict=VersionConflictOut if preconditions else None),
        headers=Preconditions if preconditions else None, tags=["user"],
        security=USER_SECURITY)


with_etag(Envelope[MemoryItemOut], VersionConflictOut)


def _one(item: MemoryItem, status: int = 200) -> Response:
    """An answer that returns one item: its version as the ETag too (SPEC §11)."""
    response, status = ok(item.to_dict(), status)
    response.status_code = status
    response.set_etag(str(item.version))
    return response


def _expected_versions() -> frozenset[int] | None:
    return wire.expected_versions(request.if_match)


@bp.errorhandler(VersionConflict)
def version_conflict(exc: VersionConflict) -> Response:
    """412: nothing changed; the item as it is now, so the client can show both and choose."""
    return conflict(exc.message, exc.current.to_dict(), exc.current.version)


@bp.get("")
@user_api
@_documented(200, MemoryPage, (400, 401, 403, 503))
def list_memories(query: MemoryListQuery):
    """List the caller's memories, newest first; filters scope, projectKey, status, q."""
    filters = Filters(scope=query.scope, project_key=query.projectKey.strip()
                      if query.projectKey else None, status=query.status, q=query.q)
    page = service.list_items(current_user_id(), filters,
                              PageRequest(query.page, query.pageSize))
    return ok(page.to_dict(MemoryItem.to_dict))


@bp.post("")
@user_api
@_documented(201, MemoryItemOut, (400, 401, 403, 409, 413, 503))
def create_memory(json: NewMemory):
    """Create a MANUAL memory (HTTP 201).

    Content holding a credential (a key, a token, a password, a card or ID number) is refused:
    400 with code 3038, the message naming the kind (SPEC §11)."""
    item = service.create_item(current_user_id(), json.scope, json.content, json.projectKey)
    return _one(item, 201)


@bp.patch("/<int:item_id>")
@user_api
@_documented(200, MemoryItemOut, (400, 401, 403, 404, 409, 413, 503), preconditions=True)
def update_memory(item_id: int, json: MemoryChange):
    """Edit content (status kept, D12) and/or switch status ACTIVE ↔ DISMISSED. With
    `If-Match`, only while the memory is still that version (else 412 with it as it is now).

    New content holding a credential is refused: 400 with code 3038, nothing changed."""
    item = service.update_item(current_user_id(), item_id, content=json.content,
                               status=json.status, expected_versions=_expected_versions())
    return _one(item)


@bp.delete("/<int:item_id>")
@user_api
@_documented(200, None, (400, 401, 403, 404, 503), preconditions=True)
def delete_memory(item_id: int):
    """Delete a memory for good (D3: the same fact may be learnt again). With `If-Match`,
    only while the memory is still that version (else 412 with it as it is now)."""
    service.delete_item(current_user_id(), item_id, expected_versions=_expected_versions())
    return ok(None)


@bp.get("/<int:item_id>/history")
@user_api
@_documented(200, list[MemoryEvent], (401, 404, 503))
def memory_history(item_id: int):
    """The memory's changes, oldest first."""
    return ok([entry.to_dict() for entry in service.history(current_user_id(), item_id)])


@bp.get("/preview")
@user_api
@_documented(200, MemoryContext, (400, 401, 503))
def preview(query: PreviewQuery):
    """Exactly what the context endpoint answers for the caller and this project key."""
    return ok_encoded(service.context_json(current_user_id(), query.projectKey))


@bp.get("/access-log")
@user_api
@_documented(200, AccessPage, (400, 401, 503))
def access_log(query: PageQuery):
    """Who read the caller's memories as an auditor, newest first."""
    page = access.page(PageRequest(query.page, query.pageSize), current_user_id())
    return ok(page.to_dict(Access.to_dict))


@bp.get("/settings")
@user_api
@_documented(200, AutoCapture, (400, 401, 503))
def get_settings():
    """The auto-capture switch; no preference row means off (D9)."""
    return ok({"autoCaptureEnabled": service.auto_capture_enabled(current_user_id())})


@bp.patch("/settings")
@user_api
@_documented(200, AutoCapture, (400, 401, 403, 413, 503))
def patch_settings(json: AutoCapture):
    """Flip auto-capture."""
    enabled = service.set_auto_capture(current_user_id(), json.autoCaptureEnabled)
    return ok({"autoCaptureEnabled": enabled})


@bp.get("/projects")
@user_api
@_documented(200, Projects, (400, 401, 503))
def projects():
    """Project keys of the caller's sessions, sorted; bot-channel keys left out."""
    return ok({"projects": service.project_keys(current_user_id())})
