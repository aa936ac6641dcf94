"""Admin pages (SPEC §6, seed §5.4): the read-only memory audit and the system settings.

The audit page only reads: it has GET routes only and renders no control that writes, just as
the admin JSON API has no endpoint that writes a memory.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, ParamSpec, TypeVar

from flask import Response, make_response, render_template, request, url_for
from werkzeug.datastructures import MultiDict

from app import messages, pages, params, wire
from app.admin.api import MEMORY_READ
from app.auth.models import User
from app.errors import DomainError
from app.extensions import db
from app.extraction import llm
from app.memory import audit, rules
from app.memory.repository import Filters
from app.memory.rules import Scope, Status
from app.paging import PageRequest
from app.system import service as system
from app.system.models import EXTRACTION_MODEL_KEY, LlmModel, SystemSetting

P = ParamSpec("P")
R = TypeVar("R")

bp = pages.blueprint("admin_pages", __name__, "/admin")

PAGE_SIZE = 20
SEARCH_MAX = 64
AUDIT_BANNER = "本页面用于审计用户记忆内容,仅供治理用途"
SCOPE_FILTERS = (("", "全部"), (Scope.USER.value, "用户"), (Scope.PROJECT.value, "项目"))
STATUS_FILTERS = (("", "全部"), (Status.ACTIVE.value, "生效中"), (Status.DISMISSED.value, "已忽略"))
# What a setting is called on the page and what it does; its key stays beside, for operators.
SETTING_TEXTS: dict[str, tuple[str, str]] = {
    EXTRACTION_MODEL_KEY: (
        "抽取模型", "自动收集用它从任务对话中提取记忆;选「默认模型」则使用运维设为默认的模型。"),
}


def allowed_if(check: Callable[[User], bool],
               refusal: str) -> Callable[[Callable[P, R]], Callable[P, R | Response]]:
    """Answer 403 with `refusal` unless the logged-in user passes `check`."""
    def decorator(view: Callable[P, R]) -> Callable[P, R | Response]:
        @functools.wraps(view)
        def wrapped(*args: P.args, **kwargs: P.kwargs) -> R | Response:
            if not check(pages.current_user()):
                return pages.error_response(403, "没有权限", refusal)
            return view(*args, **kwargs)
        return wrapped
    return decorator


def _is_admin(user: User) -> bool:
    return user.is_admin


def _can_audit(user: User) -> bool:
    return user.has_permission(MEMORY_READ)


@dataclass(frozen=True)
class AuditView:
    """What the audit page shows: a user search, the chosen user, filters, a search of their
    memories' content, page (all in the URL)."""

    q: str = ""
    user_id: int | None = None
    scope: str = ""
    status: str = ""
    page: int = 1
    text: str = ""

    @classmethod
    def from_values(cls, values: MultiDict[str, str]) -> AuditView:
        """Parsed with the domain's parsers, so a bad value is the usual 2001."""
        raw_user = values.get("userId")
        user_id = wire.user_id(raw_user, "userId") if raw_user else None
        scope = params.scope(values.get("scope"), required=False)
        status = params.status(values.get("status"), required=False)
        page = PageRequest.parse(values.get("page"), PAGE_SIZE).number
        return cls(values.get("q", "").strip()[:SEARCH_MAX], user_id,
                   scope.value if scope else "", status.value if status else "", page,
                   params.search(values.get("text")))

    def url(self, **changes: Any) -> str:
        """The audit URL of this view with `changes`; empty values stay out of the URL."""
        view = replace(self, **changes)
        return url_for("admin_pages.memory_audit", q=view.q or None, userId=view.user_id,
                       scope=view.scope or None, status=view.status or None,
                       text=view.text or None, page=view.page if view.page > 1 else None)


@bp.context_processor
def limits() -> dict[str, int]:
    return {"content_max": rules.MANUAL_CONTENT_MAX}


@bp.get("/memory")
@allowed_if(_can_audit, f"记忆审计需要 {MEMORY_READ} 权限")
def memory_audit():
    """记忆审计: search a user, read their memories; for htmx only the results fragment."""
    view = AuditView.from_values(request.args)
    found = User.search(view.q) if view.q else []
    subject = listing = None
    if view.user_id is not None:
        subject = db.session.get(User, view.user_id)
    if subject is not None:
        listing = audit.memories(
            pages.current_user().id, subject.id,
            Filters(scope=params.scope(view.scope, required=False),
                    status=params.status(view.status, required=False), q=view.text or None),
            PageRequest(view.page, PAGE_SIZE))
    return pages.canonical(pages.page_or_fragment(
        "admin/memory.html", "admin/_audit_results.html",
        banner=AUDIT_BANNER, view=view, found=found, subject=subject, listing=listing,
        scope_filters=SCOPE_FILTERS, status_filters=STATUS_FILTERS,
    ), view.url())


@bp.get("/memory/items/<int:item_id>/history")
@allowed_if(_can_audit, f"记忆审计需要 {MEMORY_READ} 权限")
def memory_history(item_id: int):
    """来源与历史 of any user's memory, read-only; recorded in that user's access log."""
    item, story = audit.provenance(pages.current_user().id, item_id)
    return render_template("memory/_history.html", story=story, item=item, reader="用户")


def _models_context() -> dict[str, Any]:
    """What a setting's form needs: the registered models for the model settings, the page's
    names for settings, and why no extraction can run now (None when one can)."""
    return {"models": system.list_models(), "model_keys": system.MODEL_SETTING_KEYS,
            "default_model": LlmModel.default(), "setting_texts": SETTING_TEXTS,
            "extraction_warning": _extraction_warning()}


def _extraction_warning() -> str | None:
    """Why no extraction can run, naming the environment variable to set when a key is missing."""
    model = llm.resolve_model()
    reason = llm.why_unusable(model)
    if reason is None:
        return None
    env = llm.api_key_env(model) if model is not None else ""
    return messages.EXTRACTION_UNAVAILABLE_FOR_ADMIN[reason].format(env=env)


@bp.get("/settings")
@allowed_if(_is_admin, "系统设置仅管理员可用")
def settings_page():
    """系统设置: every setting, with a model select for memory.extractionModelId."""
    return render_template("admin/settings.html", settings=system.list_settings(),
                           **_models_context())


@bp.put("/settings/<path:key>")
@allowed_if(_is_admin, "系统设置仅管理员可用")
def save_setting(key: str):
    """Save one setting through the system service; answers that setting's form again."""
    value = request.form.get("value", "")
    try:
        setting = system.put_setting(key, value)
    except DomainError as exc:
        setting = db.session.get(SystemSetting, key)
        if setting is None:
            raise
        # The refused value stays in the form, with the reason under it.
        html = render_template("admin/_setting.html", setting=setting, value=value,
                               error=pages.describe(exc), **_models_context())
        return make_response(html, pages.as_api_error(exc).http_status)
    return render_template("admin/_setting.html", setting=setting, value=setting.value,
                           saved=True, **_models_context())
