"""What the HTML blueprints share: page or fragment, login and CSRF, and error answers.

Pages are server-rendered; htmx swaps fragments of them. A URL that can answer both (the memory
page and its list, the audit page and its results) decides by the `HX-Request` header, so every
response of these blueprints varies on it.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from flask import Response, g, make_response, redirect, render_template, request, url_for

from app.auth import sessions
from app.auth.identity import SAFE_METHODS
from app.auth.models import User
from app.envelope import ApiError, ErrorCode
from app.errors import DomainError
from app.memory.rules import ACTIVE_PER_USER_MAX, MANUAL_CONTENT_MAX

HX_REQUEST = "HX-Request"

# What a person reads for each domain error; the service's own message is shown under it.
ERROR_TITLES: dict[ErrorCode, str] = {
    ErrorCode.UNAUTHORIZED: "请先登录",
    ErrorCode.FORBIDDEN: "没有权限",
    ErrorCode.PARAM_INVALID: "输入有误",
    ErrorCode.MODEL_NOT_FOUND: "模型不存在",
    ErrorCode.MEMORY_ITEM_NOT_FOUND: "记忆不存在或已被删除",
    ErrorCode.MEMORY_CONTENT_INVALID: f"内容不能为空,且最多 {MANUAL_CONTENT_MAX} 字",
    ErrorCode.MEMORY_CONTENT_DUPLICATE: "已有相同内容的记忆",
    ErrorCode.MEMORY_LIMIT_EXCEEDED: (
        f"生效中的记忆已达 {ACTIVE_PER_USER_MAX} 条上限,请先删除或忽略一些"
    ),
    ErrorCode.INTERNAL_ERROR: "服务暂时不可用,请稍后重试",
}


def is_htmx() -> bool:
    """An htmx request wants a fragment; a history restore after a cache miss wants the page."""
    return (request.headers.get(HX_REQUEST) == "true"
            and request.headers.get("HX-History-Restore-Request") != "true")


def page_or_fragment(page: str, fragment: str, **context: Any) -> str:
    """The fragment alone for htmx, else the full page (which includes the same fragment)."""
    return render_template(fragment if is_htmx() else page, **context)


def vary_on_htmx(response: Response) -> Response:
    """after_request of the HTML blueprints: caches must keep page and fragment apart."""
    response.vary.add(HX_REQUEST)
    return response


def current_user() -> User:
    """The logged-in user of this request (set by `require_login`)."""
    return g.page_user


def _next_url() -> str:
    """Where to come back after login: for htmx, the page the browser shows, not the fragment."""
    if is_htmx() and request.headers.get("HX-Current-URL"):
        parts = urlsplit(request.headers["HX-Current-URL"])
        return parts.path + (f"?{parts.query}" if parts.query else "")
    return request.full_path.rstrip("?")


def login_redirect() -> Response:
    """To the login page; htmx follows `HX-Redirect` with a full navigation."""
    target = url_for("auth.login", next=_next_url())
    if is_htmx():
        response = make_response("", 401)
        response.headers["HX-Redirect"] = target
        return response
    return redirect(target)


def require_login() -> Response | None:
    """before_request of the HTML blueprints: a logged-in user, and CSRF on unsafe methods."""
    user = sessions.logged_in_user()
    if user is None:
        return login_redirect()
    if request.method not in SAFE_METHODS and not sessions.csrf_valid():
        return csrf_refused()
    g.page_user = user
    return None


def csrf_refused() -> Response:
    """A form or htmx request without this session's CSRF token."""
    return error_response(403, "页面已过期,请刷新后重试", "missing or invalid CSRF token")


def as_api_error(exc: ApiError | DomainError) -> ApiError:
    return exc if isinstance(exc, ApiError) else ApiError.from_domain(exc)


def describe(exc: ApiError | DomainError) -> dict[str, str]:
    """A refusal as the pages show it: a Chinese title and the service's message."""
    error = as_api_error(exc)
    return {"title": ERROR_TITLES.get(error.error, error.message), "detail": error.message}


def error_response(status: int, title: str, detail: str = "") -> Response:
    """An error the page shows: in the flash area for htmx, else as an error page."""
    if is_htmx():
        response = make_response(render_template("_error.html", title=title, detail=detail),
                                 status)
        # Whatever the request targeted, an error belongs in the flash area.
        response.headers["HX-Retarget"] = "#flash"
        response.headers["HX-Reswap"] = "innerHTML"
        return response
    return make_response(render_template("error.html", title=title, detail=detail), status)


def api_error_response(exc: ApiError | DomainError) -> Response:
    """Error handler of the HTML blueprints for what the domain refused."""
    return error_response(as_api_error(exc).http_status, **describe(exc))
