"""The keyboard, Back and a slow network on 我的记忆: the focus stays where the person works, the
history holds only searches they committed to, and what is loading says so."""

from __future__ import annotations

import re

from flask import Flask
from playwright.sync_api import Page, Route, expect

from app.memory import audit
from app.memory.repository import Filters
from app.paging import PageRequest
from tests.browser.screens import keep
from tests.conftest import Accounts
from tests.page_support import Store


def _history_length(page: Page) -> int:
    return page.evaluate("history.length")


def test_pauses_while_typing_add_no_history_entries(page: Page, alice_id: int, store: Store):
    store.add_many(alice_id, ["ClickHouse 做分析", "Postgres 做主库"])
    page.goto("/settings/memory")
    start = _history_length(page)
    box = page.get_by_role("searchbox", name="搜索记忆")
    for part, typed in (("Cli", "Cli"), ("ckH", "ClickH"), ("ouse", "ClickHouse")):
        box.press_sequentially(part)
        expect(page).to_have_url(re.compile(f"q={typed}$"))
    assert _history_length(page) == start
    box.press("Enter")
    expect(page.locator("li.memory-row")).to_have_count(1)
    page.wait_for_timeout(300)
    assert _history_length(page) == start
    # A different search, committed with Enter, is a new entry; Back returns to the one before.
    # Typed and entered in one task, as a quick typist does: on a loaded machine two separate
    # steps could put the 300 ms typing pause between them, and Enter after a pause (the address
    # already shown) replaces by design.
    box.evaluate("""box => {
        box.value = "Postgres";
        box.dispatchEvent(new Event("input", {bubbles: true}));
        box.dispatchEvent(new Event("search", {bubbles: true}));  // what Enter fires
    }""")
    expect(page).to_have_url(re.compile("q=Postgres$"))
    page.wait_for_timeout(400)  # the pause after typing passes: it adds nothing either
    assert _history_length(page) == start + 1
    page.go_back()
    expect(page).to_have_url(re.compile("q=ClickHouse$"))


def test_a_search_while_an_edit_is_open_keeps_box_and_list_agreeing(page: Page, alice_id: int,
                                                                    store: Store):
    item, _ = store.add_many(alice_id, ["正在改的", "另一条"])
    page.goto("/settings/memory")
    row = page.locator(f"#memory-{item}")
    row.get_by_role("button", name="编辑", exact=True).click()
    row.locator("textarea").fill("改了一半")
    box = page.get_by_role("searchbox", name="搜索记忆")
    box.press_sequentially("另一")
    page.get_by_role("button", name="继续编辑", exact=True).click()
    expect(row.locator("textarea")).to_have_value("改了一半")
    expect(box).to_have_value("")
    expect(page.locator("li.memory-row")).to_have_count(2)


def test_the_switch_keeps_the_focus_after_space_and_enter(page: Page, alice_id: int):
    page.goto("/settings/memory")
    switch = page.get_by_role("switch", name="自动收集")
    switch.focus()
    page.keyboard.press("Space")
    expect(switch).to_have_attribute("aria-checked", "true")
    expect(switch).to_be_focused()
    page.keyboard.press("Enter")
    expect(switch).to_have_attribute("aria-checked", "false")
    expect(switch).to_be_focused()


def test_the_focus_follows_the_pager_and_clearing_the_search(page: Page, alice_id: int,
                                                             store: Store):
    store.add_many(alice_id, [f"第 {n} 条" for n in range(25)])
    page.goto("/settings/memory")
    page.get_by_role("link", name="下一页").focus()
    page.keyboard.press("Enter")
    expect(page.get_by_text("第 2 / 2 页")).to_be_visible()
    expect(page.locator("#memory-summary")).to_be_focused()
    page.goto("/settings/memory?q=没有这样的")
    clear = page.get_by_role("link", name="清除搜索和项目筛选")
    clear.focus()
    page.keyboard.press("Enter")
    expect(page.locator("li.memory-row")).to_have_count(20)
    expect(page.get_by_role("searchbox", name="搜索记忆")).to_be_focused()


def test_the_focus_follows_earlier_and_later_in_the_access_log(page: Page, app: Flask,
                                                               alice_id: int, users: Accounts):
    auditor = users.user("auditor", grants=("memory:read",))
    with app.app_context():
        for _ in range(12):
            audit.memories(auditor, alice_id, Filters(), PageRequest(1, 20))
    page.goto("/settings/memory")
    page.get_by_text("访问记录", exact=True).click()
    log = page.locator("#access-log-body")
    earlier = log.get_by_role("link", name="更早")
    earlier.focus()
    page.keyboard.press("Enter")
    expect(log).to_contain_text("第 2 / 2 页")
    expect(log.get_by_role("link", name="较新")).to_be_focused()


def test_escape_cancels_the_delete_confirmation(page: Page, alice_id: int, store: Store):
    item = store.add(alice_id, "一条记忆")
    page.goto("/settings/memory")
    row = page.locator(f"#memory-{item}")
    row.get_by_role("button", name="删除", exact=True).click()
    expect(row.get_by_role("button", name="确认删除", exact=True)).to_be_visible()
    page.keyboard.press("Escape")
    expect(row.get_by_role("button", name="删除", exact=True)).to_be_focused()
    assert store.get(item) is not None


def test_what_is_loading_says_so(page: Page, alice_id: int, store: Store):
    item = store.add_many(alice_id, [f"第 {n} 条" for n in range(25)])[-1]
    held: list[Route] = []
    page.goto("/settings/memory")
    page.route("**/settings/memory?page=2", lambda route: held.append(route))
    page.get_by_role("link", name="下一页").click()
    expect(page.locator("#memory-list")).to_have_attribute("aria-busy", "true")
    expect(page.get_by_role("link", name="下一页")).to_have_class(re.compile("htmx-request"))
    keep(page, "loading-pager", "default")
    held.pop().continue_()
    expect(page.get_by_text("第 2 / 2 页")).to_be_visible()
    expect(page.locator("#memory-list")).not_to_have_attribute("aria-busy", "true")

    page.goto("/settings/memory")
    page.route("**/items/*/edit", lambda route: held.append(route))
    row = page.locator(f"#memory-{item}")
    row.get_by_role("button", name="编辑", exact=True).click()
    expect(row).to_have_attribute("aria-busy", "true")
    held.pop().continue_()
    expect(row.locator("textarea")).to_be_visible()
