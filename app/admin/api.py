"""Admin JSON API (SPEC §4, seed §5.4): read-only memory audit, system settings, models, job
outcomes.

There is deliberately no admin endpoint that writes a memory.
"""

from __future__ import annotations

from flask import Blueprint, request

from app.auth.identity import admin_api, parse_user_id
from app.envelope import json_body, ok
from app.extraction import outcomes
from app.memory import service as memory
from app.system import service as system

bp = Blueprint("admin_api", __name__, url_prefix="/api/v1/admin")

MEMORY_READ = "memory:read"


@bp.get("/memory")
@admin_api(MEMORY_READ)
def audit_memory():
    """A page of one user's memories, for audit (needs memory:read)."""
    args = request.args
    user_id = parse_user_id(args.get("userId"), "userId")
    page = memory.list_items(user_id, scope=args.get("scope"), status=args.get("status"),
                             page=args.get("page"), size=args.get("pageSize"))
    return ok(page.to_dict())


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
    user_id = parse_user_id(args["userId"], "userId") if args.get("userId") else None
    return ok(outcomes.list_page(user_id=user_id, status=args.get("status") or None,
                                 kind=args.get("kind") or None, page=args.get("page"),
                                 size=args.get("pageSize")))
