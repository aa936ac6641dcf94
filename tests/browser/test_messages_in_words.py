"""Messages that say why in words: an over-long text, an empty search within a project, a missing
model key (naming its variable), and an access log that names the memory and groups repeats."""

from __future__ import annotations

import pytest
from flask import Flask
from playwright.sync_api import Page, expect

from app.extensions import db
from app.memory import audit
from app.system import service as system
from tests.browser.conftest import hand_session_to
from tests.browser.screens import keep
from tests.conftest import Accounts
from tests.page_support import Store


def test_an_over_long_text_says_why_it_cannot_be_saved(page: Page, alice_id: int,
                                                       store: Store):
    item = store.add(alice_id, "原来的内容")
    page.goto("/settings/memory")
    row = page.locator(f"#memory-{item}")
    row.get_by_role("button", name="编辑", exact=True).click()
    row.locator("textarea").fill("长" * 520)
    expect(row.locator(".counter-why")).to_have_text("超出 20 字:内容最多 500 字,删减后才能保存。")
    expect(row.get_by_role("button", name="保存", exact=True)).to_be_disabled()
    keep(page, "over-long-edit", "default")
    row.locator("textarea").fill("长" * 500)
    expect(row.locator(".counter-why")).to_be_hidden()

    page.get_by_role("button", name="新增记忆", exact=True).click()
    page.locator("#memory-content").fill("字" * 505)
    expect(page.locator("#memory-content-why")).to_have_text(
        "超出 5 字:内容最多 500 字,删减后才能保存。")


def test_the_empty_state_names_both_the_project_and_the_search(page: Page, alice_id: int,
                                                               store: Store):
    store.add(alice_id, "部署前先跑 lint", scope="PROJECT", project_key="shop")
    page.goto("/settings/memory?scope=PROJECT&project=shop&q=ClickHouse")
    expect(page.locator(".empty")).to_contain_text(
        "项目 shop 下没有内容包含「ClickHouse」的生效中记忆")


def test_a_missing_model_key_names_the_variable_to_set(page: Page, app: Flask, live_server: str,
                                                       users: Accounts,
                                                       monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("BIG_MODEL_API_KEY", raising=False)
    users.user("root", admin=True)
    with app.app_context():
        system.add_model("big", "gpt-4o", api_key_env="BIG_MODEL_API_KEY", default=True)
        db.session.remove()
    hand_session_to(page, app, live_server, "root")
    page.goto("/admin/settings")
    expect(page.locator(".warning")).to_contain_text("环境变量 BIG_MODEL_API_KEY")


def test_the_access_log_names_the_memory_and_groups_repeats(page: Page, app: Flask,
                                                            alice_id: int, users: Accounts,
                                                            store: Store):
    auditor = users.user("auditor", grants=("memory:read",))
    item = store.add(alice_id, "回答请用中文")
    store.add(alice_id, "别的记忆")
    with app.app_context():
        for _ in range(10):
            audit.history(auditor, item)
    page.goto("/settings/memory")
    page.get_by_text("访问记录", exact=True).click()
    log = page.locator("#access-log-body")
    expect(log.locator("li")).to_have_count(1)
    expect(log.locator("li")).to_contain_text("auditor 查看了记忆「回答请用中文」的来源与历史")
    expect(log.locator("li")).to_contain_text("10 次")
    keep(page, "access-log-grouped", "default")
    log.get_by_role("link", name="回答请用中文").click()
    expect(page.locator("li.memory-row")).to_have_count(1)
    expect(page.locator(f"#memory-{item}")).to_be_visible()
