"""Every state of every page a person can bring about, walked in one browser: the login form
(empty, refused, after an expired login), 我的记忆 (empty, both ends of the pager, the add dialog
with and without a project and refused, an open edit and one too long, a toast, a delete
confirmation and a deleted row, a dismissed row with 撤销, 来源与历史 with a diff, the agent's
view and the access log, the discard question, the other tabs, an empty search), the audit page
(user search, a user's memories, a history, an unknown user), the settings, the job outcomes and
the error pages. `look(name)` is called in each state; the tests of axe-core and of
the dark theme each look at them their own way."""

from __future__ import annotations

from collections.abc import Callable

from flask import Flask
from playwright.sync_api import Page, expect

from app.extensions import db
from app.extraction.models import JobOutcome
from app.memory import audit
from app.memory.repository import Filters
from app.paging import PageRequest
from app.system import service as system
from tests.browser.conftest import expire_logins, hand_session_to
from tests.conftest import PASSWORD, Accounts
from tests.page_support import Store

LONG = ("wrap appending folding lines of the deploy notes before the release, "
        "then ask the on-call engineer to publish it to production by hand")


def _scene(app: Flask, users: Accounts, store: Store, alice: int) -> int:
    """alice with a pager's worth of memories, every badge and scope, a dismissed one, a long one
    to edit (its id returned); one job outcome; an auditor's read of her memories."""
    store.add_many(alice, [f"第 {n} 条记忆" for n in range(22)])
    store.add(alice, "测试用 Vitest", scope="PROJECT", project_key="infra", source="AUTO")
    store.add(alice, "先给结论", source="CONSOLIDATED")
    store.add(alice, "不再需要的", status="DISMISSED")
    long = store.add(alice, LONG)
    auditor = users.user("auditor", grants=("memory:read",))
    with app.app_context():
        system.add_model("fast", "gpt-4o-mini", default=True)
        db.session.add(JobOutcome(
            kind="extraction", job_id="job-1", user_id=alice, status="failed",
            reason="model_error", attempts=3, inserted=0, touched=0, updated=0, dropped=0,
            demoted=0, duration_ms=1234, model="gpt-4o-mini", total_tokens=10,
            prompt_tokens=8, completion_tokens=2))
        db.session.commit()
        audit.memories(auditor, alice, Filters(), PageRequest(1, 20))
        db.session.remove()
    return long


def walk_every_state(page: Page, app: Flask, live_server: str, users: Accounts, store: Store,
                     look: Callable[[str], None]) -> None:
    page.goto("/login")
    look("login")
    page.get_by_label("用户名").fill("nobody")
    page.get_by_label("密码").fill("wrong")
    page.get_by_role("button", name="登录", exact=True).click()
    expect(page.get_by_role("alert")).to_be_visible()
    look("login-refused")

    # alice, an admin who may audit, before she has any memory.
    alice = users.user("alice", admin=True, grants=("memory:read",))
    hand_session_to(page, app, live_server, "alice")
    page.goto("/settings/memory")
    look("memory-empty")
    long = _scene(app, users, store, alice)
    page.goto("/settings/memory")
    look("memory")
    page.get_by_role("link", name="下一页").click()
    expect(page.get_by_text("第 2 / 2 页")).to_be_visible()
    look("memory-last-page")

    # From the 项目 tab: the list's project select is behind the dialog.
    page.goto("/settings/memory?scope=PROJECT")
    page.get_by_role("button", name="新增记忆", exact=True).click()
    dialog = page.get_by_role("dialog", name="新增记忆")
    dialog.get_by_label("内容").fill("新的一条")
    look("add-dialog")
    dialog.get_by_label("范围").select_option("PROJECT")
    expect(dialog.get_by_label("项目", exact=True)).to_be_visible()
    look("add-dialog-project")
    dialog.get_by_label("范围").select_option("USER")
    dialog.get_by_label("内容").fill("先给结论")
    dialog.get_by_role("button", name="保存", exact=True).click()
    expect(dialog.get_by_role("alert")).to_be_visible()
    look("add-dialog-refused")
    dialog.get_by_role("button", name="取消", exact=True).click()

    page.goto("/settings/memory")
    row = page.locator(f"#memory-{long}")
    row.get_by_role("button", name="编辑", exact=True).click()
    row.locator("textarea").fill(LONG * 4)
    expect(row.locator("[data-why]")).to_contain_text("超出")
    look("edit-too-long")
    row.locator("textarea").fill(LONG.replace("wrap appending", "WRAPPING appnd"))
    look("edit")
    page.get_by_role("navigation", name="状态").get_by_role("link", name="已忽略").click()
    expect(page.get_by_role("dialog", name="放弃未保存的修改?")).to_be_visible()
    look("discard-question")
    page.get_by_role("button", name="继续编辑", exact=True).click()
    row.get_by_role("button", name="保存", exact=True).click()
    expect(page.locator("#toast")).to_contain_text("已保存")
    look("toast")
    row.get_by_text("来源与历史").click()
    expect(row.locator(".changes .diff")).to_be_visible()
    row.get_by_text("修改前后的全文").click()
    look("history")
    doomed = page.locator("li.memory-row").nth(1)
    doomed.get_by_role("button", name="删除", exact=True).click()
    expect(page.get_by_role("button", name="确认删除", exact=True)).to_be_visible()
    look("confirm-delete")
    page.get_by_role("button", name="确认删除", exact=True).click()
    expect(doomed).to_contain_text("已删除")
    look("deleted")
    dismissed = page.locator("li.memory-row").nth(2)
    dismissed.get_by_role("button", name="忽略", exact=True).click()
    expect(dismissed.get_by_role("button", name="撤销", exact=True)).to_be_focused()
    look("dismissed-with-undo")

    page.goto("/settings/memory")
    page.get_by_text("新会话中 Agent 会看到").click()
    expect(page.locator("#preview-body")).to_contain_text("Agent")
    page.get_by_text("访问记录").click()
    expect(page.locator("#access-log-body li").first).to_be_visible()
    look("agent-view-and-access-log")
    page.goto("/settings/memory?status=DISMISSED")
    look("dismissed")
    page.goto("/settings/memory?scope=PROJECT")
    look("project-tab")
    page.goto("/settings/memory?q=nothing-like-this")
    look("search-finds-nothing")

    page.goto("/admin/memory?q=ali")
    look("audit-user-search")
    page.goto(f"/admin/memory?q=alice&userId={alice}")
    page.locator("td details.history summary").first.click()
    expect(page.locator("td .history-body .provenance").first).to_be_visible()
    look("audit-memories")
    page.goto("/admin/memory?userId=999")
    look("audit-unknown-user")
    page.goto("/admin/settings")
    look("settings")
    page.goto("/admin/outcomes")
    look("outcomes")
    page.goto("/admin/nope")
    look("not-found")
    page.goto("/settings/memory/items")
    look("method-not-allowed")

    expire_logins(app)
    page.goto("/settings/memory")
    expect(page.locator("#login-expired")).to_be_visible()
    look("login-expired")
    page.get_by_label("密码").fill(PASSWORD)
    page.get_by_role("button", name="登录", exact=True).click()
    expect(page.get_by_role("heading", name="我的记忆")).to_be_visible()
