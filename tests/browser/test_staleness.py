"""What the page shows stays true: a memory dismissed leaves an open preview at once, a row deleted
elsewhere loses its buttons when the toast says so, and a page past the last corrects
the address."""

from __future__ import annotations

import sqlalchemy as sa
from flask import Flask
from playwright.sync_api import Page, expect

from app.extensions import db
from app.memory import context
from app.memory.models import MemoryItem
from tests.browser.screens import keep
from tests.page_support import Store


def _delete_elsewhere(app: Flask, user_id: int, item_id: int) -> None:
    """As another tab's 删除 would."""
    with app.app_context():
        db.session.execute(sa.delete(MemoryItem).where(MemoryItem.id == item_id))
        db.session.commit()
        context.cache().invalidate(user_id)


def test_an_open_preview_drops_a_dismissed_memory_at_once(page: Page, alice_id: int,
                                                          store: Store):
    kept, dismissed = store.add_many(alice_id, ["留在预览里的", "要忽略的那条"])
    page.goto("/settings/memory")
    page.get_by_text("新会话中 Agent 会看到").click()
    preview = page.locator("#preview-body")
    expect(preview).to_contain_text("要忽略的那条")
    page.locator(f"#memory-{dismissed}").get_by_role("button", name="忽略", exact=True).click()
    expect(preview).not_to_contain_text("要忽略的那条")
    expect(preview).to_contain_text("留在预览里的")
    assert kept


def test_a_row_deleted_elsewhere_loses_its_buttons(page: Page, app: Flask, alice_id: int,
                                                   store: Store):
    other, gone = store.add_many(alice_id, ["另一条", "在别的标签页删掉的"])
    page.goto("/settings/memory")
    _delete_elsewhere(app, alice_id, gone)
    row = page.locator(f"#memory-{gone}")
    row.get_by_role("button", name="忽略", exact=True).click()
    expect(page.locator("#toast")).to_contain_text("这条记忆已不存在")
    expect(row).to_contain_text("已不存在")
    expect(row.get_by_role("button")).to_have_count(0)
    other_dismiss = page.locator(f"#memory-{other}").get_by_role("button", name="忽略", exact=True)
    expect(other_dismiss).to_be_enabled()
    keep(page, "row-deleted-elsewhere", "default")


def test_an_edit_of_a_memory_deleted_elsewhere_keeps_the_typed_text(page: Page, app: Flask,
                                                                    alice_id: int, store: Store):
    gone = store.add(alice_id, "原来的")
    page.goto("/settings/memory")
    row = page.locator(f"#memory-{gone}")
    row.get_by_role("button", name="编辑", exact=True).click()
    row.locator("textarea").fill("改了一半的字")
    _delete_elsewhere(app, alice_id, gone)
    row.get_by_role("button", name="保存", exact=True).click()
    expect(page.locator("#toast")).to_contain_text("这条记忆已不存在")
    expect(row).to_contain_text("你的修改没有保存")
    expect(row).to_contain_text("改了一半的字")
    expect(row.get_by_role("button")).to_have_count(0)


def test_a_page_past_the_last_corrects_the_address(page: Page, alice_id: int, store: Store):
    store.add_many(alice_id, [f"第 {n} 条" for n in range(45)])
    page.goto("/settings/memory?page=999")
    expect(page.get_by_role("navigation", name="分页")).to_contain_text("第 3 / 3 页")
    assert page.url.endswith("/settings/memory?page=3")
