"""Back and Forward show what is true now, and paging lands where the new page begins."""

from __future__ import annotations

import re
from collections.abc import Callable

from flask import Flask
from playwright.sync_api import Page, expect

from app.memory import service
from tests.browser.conftest import ON_BOTH_SCREENS
from tests.page_support import Store


def _delete_elsewhere(app: Flask, user_id: int, item_id: int) -> None:
    """What another tab, another device or the API does meanwhile."""
    with app.app_context():
        service.delete_item(user_id, item_id)


@ON_BOTH_SCREENS
def test_back_after_a_tab_change_shows_memories_as_they_are_now(page: Page, app: Flask,
                                                                alice_id: int, store: Store,
                                                                shot: Callable[[str], None]):
    gone, kept, project = store.add_many(alice_id, ["会被删掉的", "留下的", "项目里的"])
    page.goto("/settings/memory")
    expect(page.get_by_text("共 3 条")).to_be_visible()
    page.get_by_role("link", name="用户", exact=True).click()
    expect(page).to_have_url(re.compile(r"\?scope=USER$"))
    _delete_elsewhere(app, alice_id, gone)
    page.go_back()
    expect(page).to_have_url(re.compile(r"/settings/memory$"))
    expect(page.locator(f"#memory-{gone}")).to_have_count(0)
    expect(page.get_by_text("共 2 条")).to_be_visible()
    shot("back-after-delete")
    page.go_forward()
    expect(page.locator(f"#memory-{gone}")).to_have_count(0)
    expect(page.locator(f"#memory-{kept}")).to_be_visible()


@ON_BOTH_SCREENS
def test_back_shows_the_auto_capture_switch_as_it_is_now(page: Page, alice_id: int,
                                                         shot: Callable[[str], None]):
    page.goto("/settings/memory")
    page.get_by_role("link", name="已忽略").click()
    expect(page).to_have_url(re.compile(r"\?status=DISMISSED$"))
    page.get_by_role("switch", name="自动收集").click()
    expect(page.get_by_role("switch", name="自动收集")).to_have_attribute("aria-checked", "true")
    page.go_back()
    expect(page).to_have_url(re.compile(r"/settings/memory$"))
    expect(page.get_by_role("switch", name="自动收集")).to_have_attribute("aria-checked", "true")
    shot("back-after-toggle")


def test_back_to_a_page_left_for_another_shows_it_as_it_is_now(page: Page, app: Flask,
                                                               alice_id: int, store: Store):
    gone, kept = store.add_many(alice_id, ["别处删掉的", "留下的"])
    page.goto("/settings/memory")
    expect(page.locator(f"#memory-{gone}")).to_be_visible()
    page.goto("/settings/memory?status=DISMISSED")
    _delete_elsewhere(app, alice_id, gone)
    page.go_back()
    expect(page).to_have_url(re.compile(r"/settings/memory$"))
    expect(page.locator(f"#memory-{kept}")).to_be_visible()
    expect(page.locator(f"#memory-{gone}")).to_have_count(0)


@ON_BOTH_SCREENS
def test_next_page_lands_at_the_top_of_the_list(page: Page, alice_id: int, store: Store,
                                                shot: Callable[[str], None]):
    ids = store.add_many(alice_id, [f"第 {n} 条记忆" for n in range(45)])
    page.goto("/settings/memory")
    page.get_by_role("navigation", name="分页").get_by_role("link", name="下一页").click()
    expect(page.get_by_text("第 2 / 3 页")).to_be_attached()
    expect(page.locator(f"#memory-{ids[24]}")).to_be_in_viewport()
    expect(page.locator("#memory-summary")).to_be_in_viewport()
    shot("next-page")
