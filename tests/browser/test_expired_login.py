"""A login that expires while the person types: the login page says so and keeps the username,
and what was typed comes back in its form after logging in again, whether the expiry showed on
保存 or on leaving by a link (nothing lost, no leave-page prompt, no dead 保存)."""

from __future__ import annotations

from flask import Flask
from playwright.sync_api import Dialog, Page, expect

from tests.browser.conftest import expire_logins
from tests.browser.screens import keep
from tests.conftest import PASSWORD
from tests.page_support import Store


def _typing_when_the_login_expires(page: Page, app: Flask, item: int) -> list[str]:
    """An edit of `item` holding typed text when the login expires; the browser's own prompts
    (dismissed) are recorded in the list returned."""
    prompts: list[str] = []

    def record(dialog: Dialog) -> None:
        prompts.append(dialog.type)
        dialog.dismiss()

    page.on("dialog", record)
    page.goto("/settings/memory")
    row = page.locator(f"#memory-{item}")
    row.get_by_role("button", name="编辑", exact=True).click()
    row.locator("textarea").fill("登录过期前打的字")
    expire_logins(app)
    return prompts


def test_an_edit_saved_after_the_login_expired_keeps_its_text(page: Page, app: Flask,
                                                               alice_id: int, store: Store):
    item = store.add(alice_id, "原来的内容")
    prompts = _typing_when_the_login_expires(page, app, item)
    row = page.locator(f"#memory-{item}")
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
    expire_logins(app)
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


def test_leaving_by_a_link_after_the_login_expired_asks_nothing_and_keeps_the_username(
        page: Page, app: Flask, alice_id: int, store: Store):
    item = store.add(alice_id, "原来的内容")
    prompts = _typing_when_the_login_expires(page, app, item)
    # Not a save: the menu's own link, a whole page load.
    page.get_by_role("navigation", name="主导航").get_by_role("link", name="我的记忆").click()
    page.wait_for_url("**/login?**")
    expect(page.locator("#login-expired")).to_contain_text("没保存的内容会恢复")
    expect(page.get_by_label("用户名")).to_have_value("alice")
    expect(page.get_by_label("密码")).to_be_focused()
    keep(page, "expired-login-username", "desktop")
    page.get_by_label("密码").fill(PASSWORD)
    page.get_by_role("button", name="登录", exact=True).click()
    page.wait_for_url("**/settings/memory")
    expect(page.locator(f"#memory-{item} textarea")).to_have_value("登录过期前打的字")
    expect(page.locator("#toast")).to_contain_text("已恢复离开本页前没保存的内容")
    assert prompts == []
