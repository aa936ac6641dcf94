"""我的记忆 (`/settings/memory`, SPEC §6, seed §5.5): a user manages their own memories.

Every action calls `app.memory.service`, the same service as the JSON API, so the rules (D3, D7,
D12) hold identically; routes only parse the form, call it and render a fragment.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from flask import Response, make_response, redirect, render_template, request, url_for
from werkzeug.datastructures import MultiDict

from app import messages, pages, params, wire
from app.errors import DomainError, MemoryNotFound, VersionConflict
from app.extraction import llm
from app.memory import access_log as access
from app.memory import rules, service
from app.memory.models import MemoryItem
from app.memory.repository import Filters
from app.memory.rules import Scope, Status
from app.paging import Page, PageRequest

bp = pages.blueprint("user_pages", __name__, "/settings/memory")

PAGE_SIZE = 20
ACCESS_PAGE_SIZE = 10
SCOPE_TABS = (("", "全部"), (Scope.USER.value, "用户"), (Scope.PROJECT.value, "项目"))
STATUS_TABS = ((Status.ACTIVE.value, "生效中"), (Status.DISMISSED.value, "已忽略"))
LIST_TARGET = "#memory-list"
# Sent after every change of the user's memories: 已用 N / 200, the rows' injection marks and an
# open preview fetch themselves again (a change to one row may move another past a cap).
CHANGED = {"HX-Trigger-After-Swap": "memory-changed"}


@dataclass(frozen=True)
class MemoryView:
    """What the list shows: scope tab ('' = all), the project under 项目 ('' = any), status
    filter, the search box's text, page. It lives in the URL."""

    scope: str = ""
    status: str = Status.ACTIVE.value
    page: int = 1
    q: str = ""
    project: str = ""

    @classmethod
    def from_values(cls, values: MultiDict[str, str]) -> MemoryView:
        """Parsed with the service's own parsers, so a bad value is the usual 2001."""
        scope = params.scope(values.get("scope"), required=False)
        status = params.status(values.get("status") or Status.ACTIVE.value)
        page = PageRequest.parse(values.get("page"), PAGE_SIZE).number
        project = params.project_filter(values.get("project")) if scope is Scope.PROJECT else ""
        return cls(scope.value if scope else "", status.value, page,
                   params.search(values.get("q")), project)

    def filters(self) -> Filters:
        return Filters(scope=params.scope(self.scope, required=False),
                       status=params.status(self.status), q=self.q or None,
                       project_key=self.project or None)

    def url(self, **changes: Any) -> str:
        """The page URL of this view with `changes`; defaults stay out of the URL."""
        view = replace(self, **changes)
        return url_for("user_pages.memory_page", scope=view.scope or None,
                       project=(view.project or None) if view.scope == Scope.PROJECT else None,
                       status=None if view.status == Status.ACTIVE else view.status,
                       q=view.q or None, page=view.page if view.page > 1 else None)

    def shows(self, item: MemoryItem) -> bool:
        """Whether `item` belongs at the top of this view (a new memory: its first page)."""
        return (self.page == 1 and self.status == item.status
                and self.scope in ("", item.scope)
                and self.project in ("", item.project_key)
                and self.q.casefold() in item.content.casefold())

    @property
    def narrowed(self) -> bool:
        """Whether a search or a project hides memories the tabs alone would show."""
        return bool(self.q or self.project)


def _user_id() -> int:
    return pages.current_user().id


def _view_on_screen() -> MemoryView:
    """The view the browser shows: its URL keeps the view (tabs, filter and pager push it).
    An address the page itself would have refused counts as the default view: the action
    succeeded, only where to show its result is in question."""
    query = urlsplit(request.headers.get("HX-Current-URL", "")).query
    try:
        return MemoryView.from_values(MultiDict(parse_qsl(query)))
    except DomainError:
        return MemoryView()


def _view_total(view: MemoryView) -> int:
    """How many memories the view counts now (its 共 N 条)."""
    return service.list_items(_user_id(), view.filters(), PageRequest(1, 1)).total


def _capture_warning(enabled: bool) -> str | None:
    """Beside a switch that is on: why nothing will be captured, when no model can run."""
    reason = llm.unavailable_reason() if enabled else None
    return None if reason is None else messages.EXTRACTION_UNAVAILABLE_FOR_USER[reason]


def _listing(view: MemoryView) -> Page[MemoryItem]:
    return service.list_items(_user_id(), view.filters(), PageRequest(view.page, PAGE_SIZE))


def _beyond(*items: MemoryItem) -> set[int]:
    """Which of `items` a new session would not get today (marked in their rows)."""
    return service.beyond_injection_caps(_user_id(), items)


def _edited(*items: MemoryItem) -> set[int]:
    """Which of `items` the agent made and the user has since edited (自动 · 已编辑)."""
    return service.edited_machine_memories(_user_id(), items)


def _expected() -> frozenset[int] | None:
    """The version the row on screen shows: every change the page sends names it (If-Match),
    so a row out of date never overwrites a change made elsewhere (SPEC §11)."""
    return wire.expected_versions(request.if_match)


def _moved_on(item: MemoryItem) -> bool:
    """Whether the row that asked (its If-Match) showed an older version than `item`."""
    expected = _expected()
    return expected is not None and item.version not in expected


def _what_changed(current: MemoryItem, action: str) -> str:
    """What happened to a memory since the row that asked for `action` was shown, in words,
    from what the row sends of itself (its status and the hash of its words)."""
    changes = []
    if request.values.get("shown_status") not in (None, current.status):
        changes.append("已在别处被忽略" if current.status == Status.DISMISSED else "已在别处恢复")
    if request.values.get("shown_words") not in (None, current.dedup_hash):
        changes.append("内容已在别处改成了下面这样")
    said = ",".join(changes) or "已在别处改过"
    return f"这条记忆{said},所以这次的「{action}」没有执行:请看清现在的样子再决定。"


def _stale(exc: VersionConflict, action: str, focus: str) -> Response:
    """A status change or delete from a row out of date: nothing was done; the row as it is
    now, saying what changed (412)."""
    html = _row(exc.current, view=MemoryView.from_values(request.values), focus=focus,
                stale=_what_changed(exc.current, action))
    return make_response(html, 412)


def _row(item: MemoryItem, **context: Any) -> str:
    return render_template("memory/_row.html", item=item, beyond=_beyond(item),
                           edited=_edited(item), **context)


def _list_context(view: MemoryView) -> dict[str, Any]:
    listing = _listing(view)
    if not listing.records and listing.total and view.page > listing.pages:
        # The last row of the last page went away: show the page that now is the last.
        view = replace(view, page=listing.pages)
        listing = _listing(view)
    projects = service.project_choices(_user_id()) if view.scope == Scope.PROJECT else []
    return {"view": view, "listing": listing, "beyond": _beyond(*listing.records),
            "edited": _edited(*listing.records),
            "scope_tabs": SCOPE_TABS,
            "status_tabs": STATUS_TABS, "projects": projects}


@bp.context_processor
def limits() -> dict[str, int]:
    """Templates show the same limits the service enforces."""
    return {"content_max": rules.MANUAL_CONTENT_MAX, "active_max": rules.ACTIVE_PER_USER_MAX,
            "inject_user_max": rules.INJECT_USER_MAX,
            "inject_project_max": rules.INJECT_PROJECT_MAX}


@bp.get("")
def memory_page():
    """我的记忆: the whole page, or for htmx only the list (tabs, status filter, paging)."""
    view = MemoryView.from_values(request.args)
    context = _list_context(view)
    if not pages.is_htmx() and context["view"] != view:
        # A page past the last (`?page=999`): the address names the page shown.
        return redirect(context["view"].url())
    if not pages.is_htmx():
        enabled = service.auto_capture_enabled(_user_id())
        context.update(auto_capture=enabled, capture_warning=_capture_warning(enabled),
                       preview_projects=service.project_choices(_user_id()),
                       active_count=service.active_count(_user_id()))
    return pages.canonical(pages.page_or_fragment("memory/page.html", "memory/_list.html",
                                                  **context), context["view"].url())


@bp.errorhandler(MemoryNotFound)
def memory_gone(exc: MemoryNotFound) -> Response:
    """A row whose memory is gone (deleted in another tab): the toast says so, and the row on
    screen loses its buttons, keeping an edit's unsaved text in view to copy."""
    response = pages.api_error_response(exc)
    item_id = (request.view_args or {}).get("item_id")
    if pages.is_htmx() and item_id is not None:
        response.set_data(response.get_data(as_text=True) + render_template(
            "memory/_row_missing.html", item_id=item_id, content=request.form.get("content")))
    return response


@bp.get("/usage")
def usage():
    """已用 N / 200 again, and the injection marks of the rows on screen (`row`, the ids the
    page sends), after a change: out of band, each into its row's own slot."""
    # A page shows PAGE_SIZE rows, a few more after additions: anything beyond is not a page's.
    ids = [int(value) for value in request.args.getlist("row")[:rules.ACTIVE_PER_USER_MAX]
           if value.isascii() and value.isdigit()]
    items = service.items_among(_user_id(), ids)
    return render_template("memory/_usage.html", active_count=service.active_count(_user_id()),
                           items=items, beyond=_beyond(*items))


@bp.get("/items/<int:item_id>/history")
def memory_history(item_id: int):
    """来源与历史 of one row, loaded when the reader opens it."""
    return render_template("memory/_history.html", story=service.provenance(_user_id(), item_id),
                           item=service.get_item(_user_id(), item_id), reader="你")


@bp.get("/preview")
def preview():
    """新会话中 Agent 会看到: the context block for the chosen project, as the agent gets it."""
    # Named as the context read takes it: a bot key or a blank one is no project there either.
    project = rules.valid_project_key(params.project_filter(request.args.get("projectKey")),
                                      service.bot_project_keys())
    return render_template("memory/_preview.html", block=service.preview(_user_id(), project),
                           project=project,
                           left_out=service.left_out_of_context(_user_id(), project))


@bp.get("/access-log")
def access_log():
    """访问记录: who read this user's memories as an auditor, newest first."""
    request_page = PageRequest.parse(request.args.get("page"), ACCESS_PAGE_SIZE)
    log = access.page(request_page, _user_id())
    ids = {record.memory_id for record in log.records if record.memory_id is not None}
    contents = {item.id: item.content for item in service.items_among(_user_id(), ids)}
    return render_template("memory/_access_log.html", log=log, lines=_grouped(log.records),
                           contents=contents)


@dataclass(frozen=True)
class AccessLine:
    """Identical reads in one minute, shown once with how many there were."""

    access: access.Access
    count: int


def _grouped(records: list[access.Access]) -> list[AccessLine]:
    """Consecutive reads by the same viewer of the same thing within the same minute."""
    lines: list[AccessLine] = []
    for record in records:
        last = lines[-1].access if lines else None
        if last is not None and (last.viewer_id, last.what, last.memory_id,
                                 last.at.replace(second=0, microsecond=0)) == (
                record.viewer_id, record.what, record.memory_id,
                record.at.replace(second=0, microsecond=0)):
            lines[-1] = AccessLine(last, lines[-1].count + 1)
        else:
            lines.append(AccessLine(record, 1))
    return lines


@bp.get("/projects")
def project_field():
    """The project field of the add dialog, filled when scope is PROJECT (else empty)."""
    scope = request.args.get("scope")
    projects = service.project_choices(_user_id()) if scope == Scope.PROJECT else []
    return render_template("memory/_project_field.html", scope=scope, projects=projects)


@bp.post("/items")
def create_memory():
    """Add a MANUAL memory. Refused: the reason, into the dialog (what was typed stays).

    Accepted: `memory-created` closes the dialog. The new row joins the top of the list when the
    view on screen shows it; an empty list is rendered anew; otherwise the toast says where the
    memory is. A list with rows is never re-rendered, so an edit in progress survives.
    """
    form = request.form
    try:
        item = service.create_item(_user_id(), params.scope(form.get("scope")),
                                   form.get("content"), form.get("projectKey"))
    except DomainError as exc:
        html = render_template("_error.html", message=pages.describe(exc))
        return make_response(html, pages.as_api_error(exc).http_status)
    view = _view_on_screen()
    total = _view_total(view) if view.shows(item) else 0
    if total == 1:
        response = make_response(render_template(
            "memory/_list.html", notice="已新增记忆。", **_list_context(view)), 201)
        response.headers.update({"HX-Retarget": LIST_TARGET, "HX-Reswap": "outerHTML"})
    elif total:
        response = make_response(render_template(
            "memory/_created.html", shown=True, item=item, total=total, text="已新增记忆。",
            beyond=_beyond(item)), 201)
    else:
        default = MemoryView()
        response = make_response(render_template(
            "memory/_created.html", shown=False, text="已新增记忆,它在「全部 · 生效中」的最前面。",
            link={"href": default.url(), "text": "去看看"}), 201)
    response.headers["HX-Trigger"] = "memory-created"
    response.headers.update(CHANGED)
    return response


@bp.get("/items/<int:item_id>")
def memory_row(item_id: int):
    """One row, read-only (what 取消 returns to); `focus` names the button that takes focus."""
    item = service.get_item(_user_id(), item_id)
    return _row(item, focus=request.args.get("focus"))


@bp.get("/items/<int:item_id>/edit")
def memory_row_edit(item_id: int):
    """One row as an inline edit form, of the memory as it is now (saying so when the row
    showed an older version)."""
    item = service.get_item(_user_id(), item_id)
    return render_template("memory/_row_edit.html", item=item, content=item.content,
                           moved=_moved_on(item))


@bp.get("/items/<int:item_id>/delete")
def confirm_delete(item_id: int):
    """One row asking whether to delete it, naming the memory as it is now (删除 cannot be
    undone; saying so when the row showed an older version)."""
    item = service.get_item(_user_id(), item_id)
    return render_template("memory/_row_confirm_delete.html", item=item, moved=_moved_on(item))


@bp.patch("/items/<int:item_id>")
def update_memory(item_id: int):
    """Save an inline edit: the row again, or the form with the reason and the typed text.

    Only content changes here; the status stays what it was (D12).
    """
    content = request.form.get("content", "")
    expected = _expected()
    try:
        item = service.update_item(_user_id(), item_id, content=content,
                                   expected_versions=expected)
    except VersionConflict as exc:
        # Changed meanwhile: both wordings side by side, nothing typed lost.
        return make_response(render_template("memory/_row_conflict.html", item=exc.current,
                                             content=content), 412)
    except DomainError as exc:
        item = service.get_item(_user_id(), item_id)
        # The form comes back for the same version it was opened on: fixing the words must not
        # turn the save into an overwrite of a change made meanwhile.
        html = render_template("memory/_row_edit.html", item=item, content=content,
                               version=min(expected or (), default=item.version),
                               error=pages.describe(exc))
        return make_response(html, pages.as_api_error(exc).http_status)
    html = _row(item, focus="edit") + render_template("_toast_oob.html", text="已保存。")
    return html, CHANGED


@bp.patch("/items/<int:item_id>/status")
def set_memory_status(item_id: int):
    """忽略 / 恢复 / 撤销: the row in its place. Still in the view on screen: the row itself;
    gone from it: a line that says so and offers 撤销. The view's count comes along."""
    # Not `status`: that name belongs to the view on screen (sent from #memory-view).
    status = params.status(request.form.get("new_status"))
    try:
        item = service.update_item(_user_id(), item_id, status=status,
                                   expected_versions=_expected())
    except VersionConflict as exc:
        return _stale(exc, "忽略" if status is Status.DISMISSED else "恢复", "status")
    view = MemoryView.from_values(request.values)
    row = (_row(item, view=view, focus="status") if item.status == view.status
           else render_template("memory/_row_gone.html", item=item, view=view))
    return row + render_template("memory/_summary_oob.html", total=_view_total(view)), CHANGED


@bp.delete("/items/<int:item_id>")
def delete_memory(item_id: int):
    """删除 for good (D3): a line in the row's place that says so, and the view's count."""
    content = service.get_item(_user_id(), item_id).content
    try:
        service.delete_item(_user_id(), item_id, expected_versions=_expected())
    except VersionConflict as exc:
        return _stale(exc, "删除", "delete")
    view = MemoryView.from_values(request.values)
    return (render_template("memory/_row_deleted.html", item_id=item_id, content=content)
            + render_template("memory/_summary_oob.html", total=_view_total(view))), CHANGED


@bp.patch("/auto-capture")
def auto_capture():
    """Flip 自动收集 (D9); answers the switch in its new state."""
    raw = request.form.get("enabled")
    # Anything but "true"/"false" reaches the service as is, which refuses it (2001).
    enabled = {"true": True, "false": False}.get(raw, raw)
    enabled = service.set_auto_capture(_user_id(), enabled)
    # The switch answers itself: the focus stays on it, for the next Space or Enter.
    return render_template("memory/_toggle.html", auto_capture=enabled,
                           capture_warning=_capture_warning(enabled), focus=True)
