"""What every page owes a person: an icon, a Chinese page for a wrong address, targets a finger
can hit, text and controls that can be told from their background, and a page that works under
its Content-Security-Policy."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from flask import Flask
from playwright.sync_api import Page, Response, expect

from app.extensions import db
from app.system import service as system
from tests.browser.checks import check_targets_and_contrast as _check
from tests.browser.conftest import ON_BOTH_SCREENS, hand_session_to
from tests.conftest import Accounts
from tests.page_support import Store


def _scene(app: Flask, users: Accounts, store: Store) -> int:
    """alice with enough memories for a pager, every badge, a dismissed one and a project."""
    alice = users.user("alice", admin=True, grants=("memory:read",))
    store.add_many(alice, [f"第 {n} 条记忆" for n in range(22)])
    store.add(alice, "测试用 Vitest", scope="PROJECT", project_key="mao", source="AUTO")
    store.add(alice, "先给结论", source="CONSOLIDATED")
    store.add(alice, "不再需要的", status="DISMISSED")
    with app.app_context():
        system.add_model("fast", "gpt-4o-mini", default=True)
        db.session.remove()
    return alice




@ON_BOTH_SCREENS
def test_every_page_has_an_icon_and_asks_for_nothing_missing(page: Page, alice_id: int):
    failed: list[str] = []

    def note(response: Response) -> None:
        if response.status >= 400:
            failed.append(f"{response.status} {response.url}")

    page.on("response", note)
    page.goto("/settings/memory")
    icon = page.locator("link[rel=icon]")
    expect(icon).to_have_attribute("href", re.compile(r"^/static/favicon\.svg"))
    answer = page.request.get(icon.get_attribute("href"))
    assert answer.status == 200 and answer.headers["content-type"].startswith("image/svg+xml")
    legacy = page.request.get("/favicon.ico")
    assert legacy.status == 200 and legacy.headers["content-type"].startswith("image/svg+xml")
    page.wait_for_load_state("networkidle")
    assert failed == []


@ON_BOTH_SCREENS
@pytest.mark.parametrize(("path", "status", "heading"), [
    ("/admin/nope", 404, "页面不存在"),
    ("/settings/memory/items", 405, "不支持这样打开这个地址"),
])
def test_a_wrong_address_gets_a_chinese_page(page: Page, alice_id: int, path: str, status: int,
                                             heading: str, shot: Callable[[str], None]):
    response = page.goto(path)
    assert response is not None and response.status == status
    expect(page.get_by_role("heading", name=heading)).to_be_visible()
    text = page.locator("main").inner_text()
    assert not re.search(r"[A-Za-z]{3,}", text), text
    page.get_by_role("link", name="返回我的记忆").click()
    expect(page.get_by_role("heading", name="我的记忆")).to_be_visible()
    shot(f"error-{status}")


@ON_BOTH_SCREENS
def test_targets_are_big_enough_and_everything_has_enough_contrast(
        page: Page, app: Flask, live_server: str, users: Accounts, store: Store,
        shot: Callable[[str], None]):
    page.goto("/login")
    page.get_by_label("用户名").fill("nobody")
    page.get_by_label("密码").fill("wrong")
    page.get_by_role("button", name="登录", exact=True).click()
    expect(page.get_by_role("alert")).to_be_visible()
    _check(page)
    alice = _scene(app, users, store)
    hand_session_to(page, app, live_server, "alice")
    page.goto("/settings/memory")
    _check(page)
    page.get_by_role("button", name="新增记忆", exact=True).click()
    dialog = page.get_by_role("dialog", name="新增记忆")
    dialog.get_by_label("范围").select_option("PROJECT")
    expect(dialog.get_by_label("项目", exact=True)).to_be_visible()
    _check(page)
    dialog.get_by_label("项目", exact=True).fill("mao")
    dialog.get_by_label("内容").fill("新的一条")
    dialog.get_by_role("button", name="保存", exact=True).click()
    expect(page.locator("#toast")).to_contain_text("已新增记忆")
    _check(page)
    shot("contrast-notice")
    row = page.locator("li.memory-row").nth(1)
    row.get_by_role("button", name="编辑", exact=True).click()
    expect(row.get_by_label("编辑内容")).to_be_visible()
    _check(page)
    page.locator("li.memory-row").nth(2).get_by_role("button", name="删除", exact=True).click()
    _check(page)
    page.goto("/settings/memory?status=DISMISSED")
    _check(page)
    page.goto(f"/admin/memory?q=alice&userId={alice}")
    _check(page)
    page.goto("/admin/settings")
    page.get_by_role("button", name="保存", exact=True).click()
    expect(page.get_by_role("status")).to_have_text("已保存")
    _check(page)
    page.goto("/admin/nope")
    _check(page)


def test_every_page_works_under_the_content_security_policy(page: Page, app: Flask,
                                                           live_server: str, users: Accounts,
                                                           store: Store):
    """The page fixture fails a test on anything the policy blocks; this one walks every page
    and every kind of interaction, and checks each document was served with the policy."""
    documents: list[Response] = []
    page.on("response", lambda r: documents.append(r)
            if r.request.resource_type == "document" else None)
    page.goto("/login")
    users.user("alice", admin=True, grants=("memory:read",))
    page.get_by_label("用户名").fill("alice")
    page.get_by_label("密码").fill("correct horse battery")
    page.get_by_role("button", name="登录", exact=True).click()
    expect(page.get_by_role("heading", name="我的记忆")).to_be_visible()
    page.get_by_role("button", name="新增记忆", exact=True).click()
    dialog = page.get_by_role("dialog", name="新增记忆")
    dialog.get_by_label("内容").fill("回答请用中文")
    expect(dialog.locator("output")).to_have_text("6 / 500")
    dialog.get_by_role("button", name="保存", exact=True).click()
    row = page.locator("li.memory-row").first
    expect(row).to_contain_text("回答请用中文")
    expect(row.locator("time")).not_to_have_text(re.compile("UTC"))
    row.get_by_role("button", name="编辑", exact=True).click()
    row.get_by_label("编辑内容").press("Escape")
    row.get_by_role("button", name="忽略", exact=True).click()
    row.get_by_role("button", name="撤销", exact=True).click()
    row.get_by_role("button", name="删除", exact=True).click()
    row.get_by_role("button", name="确认删除", exact=True).click()
    expect(row).to_contain_text("已删除")
    page.get_by_role("switch", name="自动收集").click()
    expect(page.get_by_role("switch", name="自动收集")).to_have_attribute("aria-checked", "true")
    page.get_by_role("link", name="已忽略").click()
    expect(page).to_have_url(re.compile(r"\?status=DISMISSED$"))
    page.go_back()
    expect(page.get_by_role("link", name="生效中")).to_have_attribute("aria-current", "true")
    page.get_by_role("link", name="记忆审计").click()
    page.get_by_role("searchbox", name="查找用户").fill("alice")
    page.get_by_role("button", name="搜索", exact=True).click()
    page.get_by_role("link", name="alice").click()
    page.get_by_role("link", name="系统设置").click()
    page.get_by_role("button", name="保存", exact=True).click()
    expect(page.get_by_role("status")).to_have_text("已保存")
    page.goto("/admin/nope")
    page.get_by_role("button", name=re.compile("^退出")).click()
    expect(page.get_by_role("heading", name="登录")).to_be_visible()
    assert documents
    for response in documents:
        policy = response.headers.get("content-security-policy", "")
        assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy, response.url
