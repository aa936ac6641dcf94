"""记忆审计 and 系统设置 in a real browser."""

from __future__ import annotations

from pathlib import Path

from flask import Flask
from playwright.sync_api import Page, expect

from app.extensions import db
from app.system import service as system
from app.system.models import EXTRACTION_MODEL_KEY, SystemSetting
from tests.browser.conftest import hand_session_to
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
    page.get_by_role("button", name="搜索").click()
    page.get_by_role("link", name="alice").click()
    expect(page.get_by_role("heading", name="alice 的记忆")).to_be_visible()
    expect(page.locator("table.audit tbody tr")).to_have_count(3)
    page.get_by_role("link", name="已忽略").click()
    expect(page.locator("table.audit tbody tr")).to_have_count(1)
    expect(page).to_have_url(f"{page.url.split('?')[0]}?q=ali&userId={alice}&status=DISMISSED")
    page.reload()
    expect(page.get_by_role("note")).to_have_text(BANNER)
    expect(page.locator("table.audit tbody tr")).to_have_count(1)
    # Nothing on the page can change a memory: the only button is the search.
    expect(page.locator("main button")).to_have_count(1)
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
    select = page.get_by_label(EXTRACTION_MODEL_KEY)
    expect(select).to_have_value("")
    select.select_option(str(big))
    page.get_by_role("button", name="保存").click()
    expect(page.get_by_role("status")).to_have_text("已保存")
    page.screenshot(path=artifacts / "settings-page.png", full_page=True)
    page.reload()
    expect(page.get_by_label(EXTRACTION_MODEL_KEY)).to_have_value(str(big))
    with app.app_context():
        assert db.session.get(SystemSetting, EXTRACTION_MODEL_KEY).value == str(big)
