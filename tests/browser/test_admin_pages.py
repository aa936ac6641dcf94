"""记忆审计 and 系统设置 in a real browser."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from flask import Flask
from playwright.sync_api import Page, expect

from app.extensions import db
from app.system import service as system
from app.system.models import EXTRACTION_MODEL_KEY, SystemSetting
from tests.browser.conftest import ON_BOTH_SCREENS, hand_session_to
from tests.conftest import Accounts
from tests.page_support import Store

BANNER = "本页面用于审计用户记忆内容,仅供治理用途"


def test_audit_page_refuses_a_user_without_memory_read(page: Page, alice_id: int):
    page.goto("/settings/memory")
    expect(page.get_by_role("link", name="记忆审计")).to_have_count(0)
    response = page.goto("/admin/memory")
    assert response is not None and response.status == 403
    expect(page.get_by_role("heading", name="没有权限")).to_be_visible()
    expect(page.get_by_text(BANNER)).to_have_count(0)


def test_audit_page_shows_the_banner_and_reads_only(page: Page, app: Flask, live_server: str,
                                                   users: Accounts, store: Store,
                                                   artifacts: Path):
    alice = users.user("alice")
    store.add(alice, "回答请用中文")
    store.add(alice, "测试用 Vitest", scope="PROJECT", project_key="mao", source="AUTO")
    store.add(alice, "不再需要的", status="DISMISSED")
    users.user("auditor", grants=("memory:read",))
    hand_session_to(page, app, live_server, "auditor")
    page.goto("/settings/memory")
    page.get_by_role("link", name="记忆审计").click()
    expect(page.get_by_role("note")).to_have_text(BANNER)
    page.get_by_role("searchbox", name="查找用户").fill("ali")
    page.get_by_role("button", name="搜索", exact=True).click()
    page.get_by_role("link", name="alice").click()
    expect(page.get_by_role("heading", name="alice 的记忆")).to_be_visible()
    expect(page.locator("table.audit tbody tr")).to_have_count(3)
    page.get_by_role("link", name="已忽略").click()
    expect(page.locator("table.audit tbody tr")).to_have_count(1)
    expect(page).to_have_url(f"{page.url.split('?')[0]}?q=ali&userId={alice}&status=DISMISSED")
    page.reload()
    expect(page.get_by_role("note")).to_have_text(BANNER)
    expect(page.locator("table.audit tbody tr")).to_have_count(1)
    # Nothing on the page can change a memory: the only buttons are the two searches.
    expect(page.locator("main button")).to_have_text(["搜索", "搜索"])
    page.get_by_role("link", name="全部").last.click()
    expect(page.locator("table.audit tbody tr")).to_have_count(3)
    page.screenshot(path=artifacts / "audit-page.png", full_page=True)


def test_admin_picks_the_extraction_model(page: Page, app: Flask, live_server: str,
                                          users: Accounts, artifacts: Path):
    with app.app_context():
        system.add_model("fast", "gpt-4o-mini", default=True)
        big = system.add_model("big", "gpt-4o").id
    users.user("root", admin=True)
    hand_session_to(page, app, live_server, "root")
    page.goto("/settings/memory")
    page.get_by_role("link", name="系统设置").click()
    select = page.get_by_label("抽取模型")
    expect(select).to_have_value("")
    select.select_option(str(big))
    page.get_by_role("button", name="保存", exact=True).click()
    expect(page.get_by_role("status")).to_have_text("已保存")
    page.screenshot(path=artifacts / "settings-page.png", full_page=True)
    page.reload()
    expect(page.get_by_label("抽取模型")).to_have_value(str(big))
    with app.app_context():
        assert db.session.get(SystemSetting, EXTRACTION_MODEL_KEY).value == str(big)


def _audit_scene(store: Store, user_id: int) -> None:
    store.add(user_id, "回答请用中文", source="MANUAL")
    store.add(user_id, "这个项目的测试用 Vitest,提交前先跑 pnpm test", scope="PROJECT",
              project_key="mao-frontend-monorepo", source="AUTO")
    store.add(user_id, "先给结论再给理由", source="CONSOLIDATED", status="DISMISSED")


# Lines the text of an element takes on screen: distinct tops of the boxes of its text.
TEXT_LINES = """el => {
    const tops = new Set();
    const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    while (walker.nextNode()) {
        const range = document.createRange();
        range.selectNodeContents(walker.currentNode);
        for (const box of range.getClientRects()) {
            if (box.width > 0) tops.add(Math.round(box.top));
        }
    }
    return tops.size;
}"""
# Elements of the results that hide content behind a sideways scroll of their own.
SIDEWAYS_SCROLLERS = """root => [...root.querySelectorAll('*')].filter(
    el => el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).overflowX !== 'visible'
).map(el => el.className || el.tagName)"""


@ON_BOTH_SCREENS
def test_audit_results_read_well_on_desktop_and_phone(page: Page, app: Flask, live_server: str,
                                                      users: Accounts, store: Store,
                                                      device: str, shot: Callable[[str], None]):
    alice = users.user("alice")
    _audit_scene(store, alice)
    users.user("auditor", grants=("memory:read",))
    hand_session_to(page, app, live_server, "auditor")
    page.goto(f"/admin/memory?q=alice&userId={alice}")
    results = page.locator("#audit-results")
    expect(results.get_by_text("共 3 条")).to_be_visible()
    assert results.evaluate(SIDEWAYS_SCROLLERS) == []
    assert page.evaluate("document.documentElement.scrollWidth") <= page.viewport_size["width"]
    for badge in results.locator(".badge").all():
        assert badge.evaluate(TEXT_LINES) == 1, badge.inner_text()
    for status in results.locator("tbody td:nth-child(5)").all():
        assert status.evaluate(TEXT_LINES) == 1, status.inner_text()
    for pill in results.locator(".tabs a, .segmented a").all():
        height = pill.bounding_box()["height"]
        assert 40 <= height <= 48, (pill.inner_text(), height)
    # Every field of a memory is on screen at once (scrolled to), labelled on a phone where
    # there is no header row.
    first = results.locator("tbody tr").first
    first.scroll_into_view_if_needed()
    for cell in first.locator("td").all():
        expect(cell).to_be_in_viewport()
    shot("audit-results")


@ON_BOTH_SCREENS
def test_audit_of_an_unknown_user_says_there_is_no_such_user(page: Page, app: Flask,
                                                              live_server: str, users: Accounts,
                                                              shot: Callable[[str], None]):
    users.user("auditor", grants=("memory:read",))
    hand_session_to(page, app, live_server, "auditor")
    page.goto("/admin/memory?userId=9999")
    expect(page.get_by_text("没有这个用户")).to_be_visible()
    expect(page.get_by_text("该用户没有符合条件的记忆")).to_have_count(0)
    shot("audit-unknown-user")


@ON_BOTH_SCREENS
def test_model_setting_says_what_it_does_and_warns_when_no_model_can_run(
        page: Page, app: Flask, live_server: str, users: Accounts,
        monkeypatch: pytest.MonkeyPatch, shot: Callable[[str], None]):
    monkeypatch.setenv("OPENAI_API_KEY", "a-key")
    users.user("root", admin=True)
    hand_session_to(page, app, live_server, "root")
    page.goto("/admin/settings")
    select = page.get_by_label("抽取模型")
    expect(page.get_by_text("自动收集用它从任务对话中提取记忆")).to_be_visible()
    warning = page.get_by_text("自动收集不会提取任何记忆")
    expect(warning).to_be_visible()
    page.get_by_role("button", name="保存", exact=True).click()
    expect(page.get_by_role("status")).to_have_text("已保存")
    expect(warning).to_be_visible()
    shot("settings-without-a-model")
    with app.app_context():
        system.add_model("fast", "gpt-4o-mini", default=True)
        big = system.add_model("big", "gpt-4o", api_key_env="BIG_MODEL_API_KEY").id
        db.session.remove()
    page.reload()
    expect(warning).to_have_count(0)
    page.get_by_label("抽取模型").select_option(str(big))
    page.get_by_role("button", name="保存", exact=True).click()
    expect(page.get_by_role("status")).to_have_text("已保存")
    # Its key variable is not set: nothing can be extracted with it.
    expect(warning).to_be_visible()
    page.get_by_label("抽取模型").select_option("")
    expect(page.get_by_role("status")).to_have_count(0)
    assert select.input_value() == ""
