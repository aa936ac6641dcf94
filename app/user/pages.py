"""我的记忆 (`/settings/memory`, SPEC §6, seed §5.5): a user manages their own memories.

Every action calls `app.memory.service`, the same service as the JSON API, so the rules (D3, D7,
D12) hold identically; routes only parse the form, call it and render a fragment.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from flask import Blueprint, Response, make_response, render_template, request, url_for
from werkzeug.datastructures import MultiDict

from app import pages, params
from app.envelope import ApiError
from app.errors import DomainError
from app.memory import rules, service
from app.memory.models import MemoryItem
from app.memory.repository import Filters
from app.memory.rules import Scope, Status
from app.paging import Page, PageRequest

bp = Blueprint("user_pages", __name__, url_prefix="/settings/memory")
bp.before_request(pages.require_login)
bp.after_request(pages.vary_on_htmx)
bp.register_error_handler(DomainError, pages.api_error_response)
bp.register_error_handler(ApiError, pages.api_error_response)

PAGE_SIZE = 20
SCOPE_TABS = (("", "全部"), (Scope.USER.value, "用户"), (Scope.PROJECT.value, "项目"))
STATUS_TABS = ((Status.ACTIVE.value, "生效中"), (Status.DISMISSED.value, "已忽略"))
LIST_TARGET = "#memory-list"


@dataclass(frozen=True)
class MemoryView:
    """What the list shows: scope tab ('' = all), status filter, page. It lives in the URL."""

    scope: str = ""
    status: str = Status.ACTIVE.value
    page: int = 1

    @classmethod
    def from_values(cls, values: MultiDict[str, str]) -> MemoryView:
        """Parsed with the service's own parsers, so a bad value is the usual 2001."""
        scope = params.scope(values.get("scope"), required=False)
        status = params.status(values.get("status") or Status.ACTIVE.value)
        page = PageRequest.parse(values.get("page"), PAGE_SIZE).number
        return cls(scope.value if scope else "", status.value, page)

    def url(self, **changes: Any) -> str:
        """The page URL of this view with `changes`; defaults stay out of the URL."""
        view = replace(self, **changes)
        return url_for("user_pages.memory_page", scope=view.scope or None,
                       status=None if view.status == Status.ACTIVE else view.status,
                       page=view.page if view.page > 1 else None)


def _user_id() -> int:
    return pages.current_user().id


def _listing(view: MemoryView) -> Page[MemoryItem]:
    filters = Filters(scope=params.scope(view.scope, required=False),
                      status=params.status(view.status))
    return service.list_items(_user_id(), filters, PageRequest(view.page, PAGE_SIZE))


def _list_context(view: MemoryView) -> dict[str, Any]:
    listing = _listing(view)
    if not listing.records and listing.total and view.page > listing.pages:
        # The last row of the last page went away: show the page that now is the last.
        view = replace(view, page=listing.pages)
        listing = _listing(view)
    return {"view": view, "listing": listing, "scope_tabs": SCOPE_TABS,
            "status_tabs": STATUS_TABS}


def _list_fragment(view: MemoryView, notice: str, status: int = 200) -> Response:
    """The list after an action, with a notice for the flash area."""
    html = render_template("memory/_list.html", notice=notice, **_list_context(view))
    return make_response(html, status)


@bp.context_processor
def limits() -> dict[str, int]:
    """Templates show the same limit the service enforces."""
    return {"content_max": rules.MANUAL_CONTENT_MAX}


@bp.get("")
def memory_page():
    """我的记忆: the whole page, or for htmx only the list (tabs, status filter, paging)."""
    view = MemoryView.from_values(request.args)
    context = _list_context(view)
    return pages.page_or_fragment(
        "memory/page.html", "memory/_list.html",
        auto_capture=service.auto_capture_enabled(_user_id()), **context,
    )


@bp.get("/projects")
def project_field():
    """The project select of the add dialog, filled when scope is PROJECT (else empty)."""
    scope = request.args.get("scope")
    projects = service.project_keys(_user_id()) if scope == Scope.PROJECT else []
    return render_template("memory/_project_field.html", scope=scope, projects=projects)


@bp.post("/items")
def create_memory():
    """Add a MANUAL memory. Refused: the error, into the dialog (what was typed stays).

    Accepted: the default view's list, swapped in place of the old one, and `memory-created`
    so the page closes and clears the dialog.
    """
    form = request.form
    try:
        service.create_item(_user_id(), params.scope(form.get("scope")), form.get("content"),
                            form.get("projectKey"))
    except DomainError as exc:
        html = render_template("_error.html", **pages.describe(exc))
        return make_response(html, pages.as_api_error(exc).http_status)
    view = MemoryView()
    response = _list_fragment(view, "已新增记忆。", 201)
    response.headers.update({
        "HX-Retarget": LIST_TARGET,
        "HX-Reswap": "outerHTML",
        "HX-Push-Url": view.url(),
        "HX-Trigger": "memory-created",
    })
    return response


@bp.get("/items/<int:item_id>")
def memory_row(item_id: int):
    """One row, read-only (what 取消 returns to)."""
    item = service.get_item(_user_id(), item_id)
    return render_template("memory/_row.html", item=item)


@bp.get("/items/<int:item_id>/edit")
def memory_row_edit(item_id: int):
    """One row as an inline edit form."""
    item = service.get_item(_user_id(), item_id)
    return render_template("memory/_row_edit.html", item=item, content=item.content)


@bp.patch("/items/<int:item_id>")
def update_memory(item_id: int):
    """Save an inline edit: the row again, or the form with the error and the typed text.

    Only content changes here; the status stays what it was (D12).
    """
    content = request.form.get("content", "")
    try:
        item = service.update_item(_user_id(), item_id, content=content)
    except DomainError as exc:
        item = service.get_item(_user_id(), item_id)
        html = render_template("memory/_row_edit.html", item=item, content=content,
                               error=pages.describe(exc))
        return make_response(html, pages.as_api_error(exc).http_status)
    return render_template("memory/_row.html", item=item)


@bp.patch("/items/<int:item_id>/status")
def set_memory_status(item_id: int):
    """忽略 / 恢复: the list of the current view, where the row no longer belongs."""
    # Not `status`: that name belongs to the view the list is re-rendered for.
    status = request.form.get("new_status")
    service.update_item(_user_id(), item_id, status=params.status(status))
    notice = ("已恢复为生效中。" if status == Status.ACTIVE
              else "已忽略:这条记忆不再提供给 Agent,可在「已忽略」中恢复。")
    return _list_fragment(MemoryView.from_values(request.values), notice)


@bp.delete("/items/<int:item_id>")
def delete_memory(item_id: int):
    """删除 for good (D3): the list of the current view without the row."""
    service.delete_item(_user_id(), item_id)
    return _list_fragment(MemoryView.from_values(request.values), "已删除。")


@bp.patch("/auto-capture")
def auto_capture():
    """Flip 自动收集 (D9); answers the switch in its new state."""
    raw = request.form.get("enabled")
    # Anything but "true"/"false" reaches the service as is, which refuses it (2001).
    enabled = {"true": True, "false": False}.get(raw, raw)
    return render_template("memory/_toggle.html",
                           auto_capture=service.set_auto_capture(_user_id(), enabled))
