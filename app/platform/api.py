"""Platform endpoints: the memory block for a new session's system prompt (seed §5.2).

`GET /api/v1/internal/memory/context` is read at the start of every agent session, so it is a
hot path (`app.platform.hot_path`): `ContextRead` answers every request on it in front of Flask;
the route below stays for the URL map and the OpenAPI document and hands over to it.
"""

from __future__ import annotations

from wsgiref.types import WSGIEnvironment

from flask import Blueprint

from app.apispec import SERVICE_SECURITY, answers, described, validated
from app.auth.identity import bearer_token, is_service_token, service_token_refused
from app.envelope import ok_body
from app.memory import service
from app.platform.hot_path import HotPath, served_by
from app.schemas.memory import MemoryContext
from app.schemas.platform import ContextQuery
from app.wire import query_pairs

bp = Blueprint("platform_api", __name__, url_prefix="/api/v1/internal")
ENDPOINT = "platform_api.memory_context"


def query_of(query_string: str) -> dict[str, str]:
    """The query as `request.args.to_dict()` reads it (a repeated name: its first value), but
    strict: text that is not UTF-8 is refused (`wire.query_pairs`), not replaced by U+FFFD."""
    query: dict[str, str] = {}
    for name, value in query_pairs(query_string):
        query.setdefault(name, value)
    return query


class ContextRead(HotPath):
    """Memories and the exact prompt block for a new session: PROJECT lines (valid key only)
    then USER lines, newest first, 12 + 8, and the prompt."""

    endpoint = ENDPOINT
    methods = ("GET",)

    def answer(self, environ: WSGIEnvironment) -> tuple[int, str]:
        query = query_of(environ.get("QUERY_STRING", ""))
        if not is_service_token(bearer_token(environ.get("HTTP_AUTHORIZATION", ""))):
            raise service_token_refused()
        valid = validated(ContextQuery, query)
        return 200, ok_body(service.context_json(valid.userId, valid.projectKey))


@bp.get("/memory/context")
def memory_context():
    """Memories and the exact prompt block for a new session.

    PROJECT lines (valid key only) then USER lines, newest first, 12 + 8, and the prompt."""
    return served_by(ENDPOINT)


described(memory_context, query=ContextQuery, tags=["platform"], security=SERVICE_SECURITY,
          resp=answers(200, MemoryContext, errors=(400, 401, 503)))
