"""A login that expires while the person types: the login page says so, and what was typed comes
back in its form after logging in again (nothing lost, no leave-page prompt, no dead 保存)."""

from __future__ import annotations

import sqlalchemy as sa
from flask import Flask
from playwright.sync_api import Dialog, Page, expect

from app.auth.models import LoginSession
from app.extensions import db
from tests.browser.screens import keep
from tests.conftest import PASSWORD
from tests.page_support import Store


def _expire_logins(app: Flask) -> None:
    with app.app_context():
        db.session.execute(sa.delete(LoginSession))
        db.session.commit()


def test_an_edit_saved_after_the_login_expired_keeps_its_text(page: Page, app: Flask,
                                                               alice_id: int, store: Store):
    item = store.add(alice_id, "原来的内容")
    prompts: list[str] = []

    def record(dialog: Dialog) -> None:
        prompts.append(dialog.type)
        dialog.dismiss()

    page.on("dialog", record)
    page.goto("/settings/memory")
    row = page.locator(f"#memory-{item}")
    row.get_by_role("button", name="编辑", exact=True).click()
    row.locator("textarea").fill("登录过期前打的字")
    _expire_logins(app)
    row.get_by_role("button", name="保存", exact=True).click()

    page.wait_for_url("**/login?**")
    assert "expired=1" in page.url
    expect(page.locator("#login-expired")).to_contain_text("登录已过期")
    keep(page, "expired-login", "desktop")
    page.get_by_label("用户名").fill("alice")
    page.get_by_label("密码").fill(PASSWORD)
    page.get_by_role("button", name="登录", exact=True).click()

    page.wait_for_url("**/settings/memory")
    area = row.locator("textarea")
    expect(area).to_have_value("登录过期前打的字")
    expect(page.locator("#toast")).to_contain_text("已恢复登录过期前没保存的内容")
    keep(page, "expired-login-restored", "desktop")
    row.get_by_role("button", name="保存", exact=True).click()
    expect(row.locator(".memory-content")).to_have_text("登录过期前打的字")
    assert store.get(item)["content"] == "登录过期前打的字"
    assert prompts == []


def test_the_add_dialog_keeps_its_text_over_an_expired_login(page: Page, app: Flask,
                                                              alice_id: int):
    page.goto("/settings/memory")
    page.get_by_role("button", name="新增记忆", exact=True).click()
    page.locator("#memory-content").fill("对话框里打的字")
    _expire_logins(app)
    page.locator("#memory-dialog").get_by_role("button", name="保存", exact=True).click()
    page.wait_for_url("**/login?**")
    page.get_by_label("用户名").fill("alice")
    page.get_by_label("密码").fill(PASSWORD)
    page.get_by_role("button", name="登录", exact=True).click()
    page.wait_for_url("**/settings/memory")
    expect(page.locator("#memory-dialog")).to_be_visible()
    expect(page.locator("#memory-content")).to_have_value("对话框里打的字")
    dialog_save = page.locator("#memory-dialog").get_by_role("button", name="保存", exact=True)
    expect(dialog_save).to_be_enabled()
