"""Admin JSON API (SPEC §4, seed §5.4): read-only memory audit, system settings, models, job
outcomes.

There is deliberately no admin endpoint that writes a memory.
"""

from __future__ import annotations

from flask import Blueprint

from app.apispec import ADMIN_SECURITY, answers, api
from app.auth.identity import admin_api, current_user_id
from app.envelope import ok
from app.extraction.models import JobOutcome as OutcomeRow
from app.memory import access_log as access
from app.memory import audit
from app.memory.models import MemoryItem
from app.memory.repository import Filters
from app.paging import PageRequest
from app.schemas import PageQuery
from app.schemas.admin import AuditQuery, Model, OutcomePage, OutcomeQuery, Setting, SettingValue
from app.schemas.memory import AccessPage, MemoryEvent, MemoryPage
from app.system import service as system

bp = Blueprint("admin_api", __name__, url_prefix="/api/v1/admin")

MEMORY_READ = "memory:read"


def _documented(data: object, errors: tuple[int, ...]):
    return api.validate(resp=answers(200, data, errors=errors), tags=["admin"],
                        security=ADMIN_SECURITY)


@bp.get("/memory")
@admin_api(MEMORY_READ)
@_documented(MemoryPage, (400, 401, 403, 503))
def audit_memory(query: AuditQuery):
    """Audit one user's memories (read-only; needs memory:read)."""
    filters = Filters(scope=query.scope, status=query.status, q=query.q)
    page = audit.memories(current_user_id(), query.userId, filters,
                          PageRequest(query.page, query.pageSize))
    return ok(page.to_dict(MemoryItem.to_dict))


@bp.get("/memory/<int:item_id>/history")
@admin_api(MEMORY_READ)
@_documented(list[MemoryEvent], (401, 403, 404, 503))
def audit_history(item_id: int):
    """Any user's memory's changes, oldest first, for audit (needs memory:read)."""
    return ok([entry.to_dict() for entry in audit.history(current_user_id(), item_id)])


@bp.get("/access-log")
@admin_api()
@_documented(AccessPage, (400, 401, 403, 503))
def access_log(query: PageQuery):
    """Every audit read of anyone's memories, newest first (admins)."""
    page = access.page(PageRequest(query.page, query.pageSize))
    return ok(page.to_dict(lambda record: record.to_dict(with_subject=True)))


@bp.get("/settings")
@admin_api()
@_documented(list[Setting], (401, 403, 503))
def list_settings():
    """System settings (admins)."""
    return ok([s.to_dict() for s in system.list_settings()])


@bp.put("/settings/<path:key>")
@admin_api()
# 404: a key that routes nowhere (one with a newline in it).
@_documented(Setting, (400, 401, 403, 404, 413, 503))
def put_setting(key: str, json: SettingValue):
    """Change a setting; memory.extractionModelId takes '' or a model id."""
    return ok(system.put_setting(key, json.value).to_dict())


@bp.get("/models")
@admin_api()
@_documented(list[Model], (401, 403, 503))
def list_models():
    """Registered LLM models (admins)."""
    return ok([m.to_dict() for m in system.list_models()])


@bp.get("/outcomes")
@admin_api()
@_documented(OutcomePage, (400, 401, 403, 503))
def list_outcomes(query: OutcomeQuery):
    """Background job outcomes, newest first (admins); filters userId, status, kind."""
    page = OutcomeRow.page(PageRequest(query.page, query.pageSize), user_id=query.userId,
                           status=query.status, kind=query.kind)
    return ok(page.to_dict(OutcomeRow.to_dict))
