"""Admin JSON API (SPEC §4, seed §5.4): read-only memory audit, system settings, models, job
outcomes.

There is deliberately no admin endpoint that writes a memory.
"""

from __future__ import annotations

from flask import Blueprint, request

from app import params
from app.auth.identity import admin_api, current_user_id
from app.envelope import json_body, ok
from app.errors import InvalidInput
from app.extraction.models import JobOutcome
from app.extraction.outcomes import OutcomeStatus
from app.memory import access_log as access
from app.memory import audit
from app.memory.models import MemoryItem
from app.system import service as system

bp = Blueprint("admin_api", __name__, url_prefix="/api/v1/admin")

MEMORY_READ = "memory:read"


@bp.get("/memory")
@admin_api(MEMORY_READ)
def audit_memory():
    """A page of one user's memories, for audit (needs memory:read)."""
    args = request.args
    user_id = params.user_id(args.get("userId"), "userId")
    page = audit.memories(current_user_id(), user_id, params.filters(args, project_key=False),
                          params.page_request(args))
    return ok(page.to_dict(MemoryItem.to_dict))


@bp.get("/memory/<int:item_id>/history")
@admin_api(MEMORY_READ)
def audit_history(item_id: int):
    """Any user's memory's changes, oldest first, for audit (needs memory:read)."""
    return ok([entry.to_dict() for entry in audit.history(current_user_id(), item_id)])


@bp.get("/access-log")
@admin_api()
def access_log():
    """Every audit read of anyone's memories, newest first (admins)."""
    page = access.page(params.page_request(request.args))
    return ok(page.to_dict(lambda record: record.to_dict(with_subject=True)))


@bp.get("/settings")
@admin_api()
def list_settings():
    """Every system setting."""
    return ok([s.to_dict() for s in system.list_settings()])


@bp.put("/settings/<path:key>")
@admin_api()
def put_setting(key: str):
    """Change one setting; memory.extractionModelId must be '' or a registered model's id."""
    body = json_body()
    setting = system.put_setting(key, body.get("value"))
    return ok(setting.to_dict())


@bp.get("/models")
@admin_api()
def list_models():
    """Registered LLM models."""
    return ok([m.to_dict() for m in system.list_models()])


@bp.get("/outcomes")
@admin_api()
def list_outcomes():
    """A page of background job outcomes, newest first (admins); filters userId, status, kind."""
    args = request.args
    user_id = params.user_id(args["userId"], "userId") if args.get("userId") else None
    status, kind = args.get("status") or None, args.get("kind") or None
    if status is not None and status not in set(OutcomeStatus):
        raise InvalidInput("outcome_status_invalid",
                           f"status must be one of {', '.join(s.value for s in OutcomeStatus)}")
    if kind is not None and len(kind) > 32:
        raise InvalidInput("outcome_kind_invalid", "kind must be a job kind such as extraction")
    page = JobOutcome.page(params.page_request(args), user_id=user_id, status=status, kind=kind)
    return ok(page.to_dict(JobOutcome.to_dict))
