"""Platform endpoints: the memory block for a new session's system prompt (seed §5.2)."""

from __future__ import annotations

from flask import Blueprint, request

from app.apispec import SERVICE_SECURITY, answers, described, validated
from app.auth.identity import service_api
from app.envelope import ok_encoded
from app.memory import service
from app.platform import fast_context
from app.schemas.memory import MemoryContext
from app.schemas.platform import ContextQuery

bp = Blueprint("platform_api", __name__, url_prefix="/api/v1/internal")


@bp.get("/memory/context")
@service_api
def memory_context():
    """Memories and the exact prompt block for a new session.

    PROJECT lines (valid key only) then USER lines, newest first, 12 + 8, and the prompt."""
    query = validated(ContextQuery, request.args.to_dict())
    failed = request.environ.get(fast_context.FAILED)
    if failed is not None:
        # The fast path in front of Flask met the database down on this very request: the
        # same 503, without asking it again.
        raise failed
    return ok_encoded(service.context_json(query.userId, query.projectKey))


# The hot path validates with its model directly: only described, never wrapped.
described(memory_context, query=ContextQuery, tags=["platform"], security=SERVICE_SECURITY,
          resp=answers(200, MemoryContext, errors=(400, 401, 503)))
