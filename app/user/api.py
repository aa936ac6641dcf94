"""User JSON API (SPEC §4, seed §5.3): a user's own memories, auto-capture switch, projects."""

from __future__ import annotations

from flask import Blueprint, request

from app import params
from app.auth.identity import current_user_id, user_api
from app.envelope import json_body, ok, ok_encoded
from app.errors import InvalidInput
from app.memory import access_log as access
from app.memory import service
from app.memory.access_log import Access
from app.memory.models import MemoryItem

bp = Blueprint("user_api", __name__, url_prefix="/api/v1/memory")


@bp.get("")
@user_api
def list_memories():
    """A page of the caller's memories, newest first; filters scope, projectKey, status."""
    page = service.list_items(current_user_id(), params.filters(request.args),
                              params.page_request(request.args))
    return ok(page.to_dict(MemoryItem.to_dict))


@bp.post("")
@user_api
def create_memory():
    """A new MANUAL memory (HTTP 201)."""
    body = json_body()
    item = service.create_item(current_user_id(), params.scope(body.get("scope")),
                               body.get("content"), body.get("projectKey"))
    return ok(item.to_dict(), 201)


@bp.patch("/<int:item_id>")
@user_api
def update_memory(item_id: int):
    """Edit content (status kept, D12) and/or switch status ACTIVE ↔ DISMISSED."""
    body = json_body()
    item = service.update_item(current_user_id(), item_id, content=body.get("content"),
                               status=None if body.get("status") is None
                               else params.status(body["status"]))
    return ok(item.to_dict())


@bp.delete("/<int:item_id>")
@user_api
def delete_memory(item_id: int):
    """Delete for good (D3: the same fact may be learnt again)."""
    service.delete_item(current_user_id(), item_id)
    return ok(None)


@bp.get("/<int:item_id>/history")
@user_api
def memory_history(item_id: int):
    """How the memory came to be what it is: its changes, oldest first."""
    return ok([entry.to_dict() for entry in service.history(current_user_id(), item_id)])


@bp.get("/preview")
@user_api
def preview():
    """Exactly what the context endpoint answers for the caller and this project key."""
    return ok_encoded(service.context_json(current_user_id(), request.args.get("projectKey")))


@bp.get("/access-log")
@user_api
def access_log():
    """Who read the caller's memories as an auditor, newest first."""
    page = access.page(params.page_request(request.args), current_user_id())
    return ok(page.to_dict(Access.to_dict))


@bp.get("/settings")
@user_api
def get_settings():
    """The auto-capture switch; no preference row means off (D9)."""
    return ok({"autoCaptureEnabled": service.auto_capture_enabled(current_user_id())})


@bp.patch("/settings")
@user_api
def patch_settings():
    """Flip auto-capture."""
    body = json_body()
    if "autoCaptureEnabled" not in body:
        raise InvalidInput("auto_capture_required", "autoCaptureEnabled is required")
    enabled = service.set_auto_capture(current_user_id(), body["autoCaptureEnabled"])
    return ok({"autoCaptureEnabled": enabled})


@bp.get("/projects")
@user_api
def projects():
    """Project keys of the caller's sessions, sorted; bot-channel keys left out."""
    return ok({"projects": service.project_keys(current_user_id())})
