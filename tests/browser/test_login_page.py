"""Logging in: a mistake costs the password, never the username."""

from __future__ import annotations

from collections.abc import Callable

from playwright.sync_api import Page, expect

from tests.browser.conftest import ON_BOTH_SCREENS
from tests.conftest import Accounts


@ON_BOTH_SCREENS
def test_failed_login_keeps_the_username(page: Page, users: Accounts,
                                         shot: Callable[[str], None]):
    users.user("alice")
    page.goto("/login")
    page.get_by_label("用户名").fill("alice")
    page.get_by_label("密码").fill("wrong")
    page.get_by_role("button", name="登录", exact=True).click()
    expect(page.get_by_role("alert")).to_be_visible()
    expect(page.get_by_label("用户名")).to_have_value("alice")
    expect(page.get_by_role("alert")).to_have_text("用户名或密码错误,请重新输入密码。")
    expect(page.get_by_label("密码")).to_have_value("")
    expect(page.get_by_label("密码")).to_be_focused()
    shot("login-failed")
