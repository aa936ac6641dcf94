"""Platform endpoints: the memory block for a new session's system prompt (seed §5.2)."""

from __future__ import annotations

from flask import Blueprint, request

from app import params
from app.auth.identity import service_api
from app.envelope import ok_encoded
from app.memory import service

bp = Blueprint("platform_api", __name__, url_prefix="/api/v1/internal")


@bp.get("/memory/context")
@service_api
def memory_context():
    """PROJECT lines (valid key only) then USER lines, newest first, 12 + 8, and the prompt."""
    user_id = params.user_id(request.args.get("userId"), "userId")
    return ok_encoded(service.context_json(user_id, request.args.get("projectKey")))
