"""我的记忆 and the audit page, fourth pass (issue #34): each point from a browser review, tested at
the screen where it showed. The dark theme and axe-core have their own files."""

from __future__ import annotations

import re

import pytest
from flask import Flask
from playwright.sync_api import Page, Route, expect

from app.memory import rules
from tests.browser.axe import axe_violations
from tests.browser.conftest import hand_session_to
from tests.browser.screens import keep
from tests.conftest import Accounts
from tests.page_support import Store

ON_THE_PHONE = pytest.mark.parametrize("device", ["phone"], indirect=True)
ON_THE_DESKTOP = pytest.mark.parametrize("device", ["desktop"], indirect=True)
LONG_KEY = "github.com/example-organisation/a-rather-long-repository-name-xy"
# Lines a piece of text takes on screen.
TEXT_LINES = """el => {
    const range = document.createRange();
    range.selectNodeContents(el);
    return new Set([...range.getClientRects()].filter(b => b.width > 0)
                   .map(b => Math.round(b.top))).size;
}"""


@ON_THE_PHONE
def test_the_toast_leaves_the_next_row_in_reach_on_a_phone(page: Page, alice_id: int,
                                                          store: Store, device: str):
    store.add_many(alice_id, [f"第 {n} 条记忆" for n in range(20)])
    page.goto("/settings/memory")
    first, second = page.locator("li.memory-row").nth(0), page.locator("li.memory-row").nth(1)
    first.get_by_role("button", name="编辑", exact=True).click()
    first.locator("textarea").fill("改过的内容")
    first.get_by_role("button", name="保存", exact=True).click()
    expect(first.get_by_role("button", name="编辑", exact=True)).to_be_focused()
    toast = page.locator("#toast .toast-message")
    expect(toast).to_be_visible()
    page.wait_for_timeout(100)
    cover = toast.bounding_box()
    assert cover is not None
    # The 6 s the notice shows: both rows' buttons can be tapped, none under the toast.
    for row in (first, second):
        for name in ("编辑", "忽略", "删除"):
            box = row.get_by_role("button", name=name, exact=True).bounding_box()
            assert box is not None and 0 <= box["y"], (name, box)
            assert box["y"] + box["height"] <= cover["y"], (name, box, cover)
    keep(page, "toast-next-row", device)


@ON_THE_DESKTOP
def test_every_id_is_unique_and_the_dialogs_project_label_names_its_own_field(
        page: Page, alice_id: int, store: Store):
    store.add(alice_id, "测试用 Vitest", scope="PROJECT", project_key="mao")
    # The list's own project select is on the page, behind the dialog.
    page.goto("/settings/memory?scope=PROJECT")
    expect(page.locator("#memory-list").get_by_label("项目", exact=True)).to_be_visible()
    page.get_by_role("button", name="新增记忆", exact=True).click()
    dialog = page.get_by_role("dialog", name="新增记忆")
    dialog.get_by_label("范围").select_option("PROJECT")
    field = dialog.get_by_label("项目", exact=True)
    expect(field).to_be_visible()
    assert page.evaluate("""() => {
        const ids = [...document.querySelectorAll('[id]')].map(el => el.id);
        return ids.filter((id, n) => ids.indexOf(id) !== n);
    }""") == []
    # Clicking the label reaches the dialog's field, not the select behind the dialog.
    dialog.locator("label", has_text="项目").filter(has_not_text="范围").click()
    expect(field).to_be_focused()
    field.fill("zeta")
    dialog.get_by_label("内容").fill("部署前先跑 lint")
    dialog.get_by_role("button", name="保存", exact=True).click()
    expect(dialog).to_be_hidden()
    assert ("PROJECT", "zeta") in {(m["scope"], m["projectKey"]) for m in store.of(alice_id)}


@ON_THE_DESKTOP
def test_short_project_keys_stay_whole_in_the_audit_table(page: Page, app: Flask,
                                                          live_server: str, users: Accounts,
                                                          store: Store):
    alice = users.user("alice")
    # A long memory takes the table's width; every key beside it is short.
    store.add(alice, "部署流程:先在预发环境验证,再由值班同学手动发布到生产环境。" * 6,
              scope="PROJECT", project_key="infra")
    store.add(alice, "前端用 pnpm", scope="PROJECT", project_key="frontend-web")
    users.user("auditor", grants=("memory:read",))
    hand_session_to(page, app, live_server, "auditor")
    page.goto(f"/admin/memory?q=alice&userId={alice}")
    keys = page.locator("table.audit td code")
    expect(keys).to_have_count(2)
    for key in keys.all():
        assert key.evaluate(TEXT_LINES) == 1, key.inner_text()
    keep(page, "audit-short-keys", "desktop")


@ON_THE_DESKTOP
def test_the_history_diff_changes_whole_words_and_says_which(page: Page, alice_id: int,
                                                             store: Store):
    before = ("wrap appending folding lines of the deploy notes before the release, "
              "then ask the on-call engineer to publish it to production by hand")
    item = store.add(alice_id, before)
    page.goto("/settings/memory")
    row = page.locator(f"#memory-{item}")
    row.get_by_role("button", name="编辑", exact=True).click()
    row.locator("textarea").fill(before.replace("wrap appending", "WRAPPING appnd"))
    row.get_by_role("button", name="保存", exact=True).click()
    expect(page.locator("#toast")).to_contain_text("已保存")
    row.get_by_text("来源与历史").click()
    diff = row.locator(".changes li").last.locator(".diff")
    expect(diff.locator("del")).to_have_text(["wrap", "appending"])
    expect(diff.locator("ins")).to_have_text(["WRAPPING", "appnd"])
    # What a screen reader reads: each change named, no word glued to another.
    spoken = " ".join(diff.text_content().split())
    assert spoken.startswith("删除 wrap 新增 WRAPPING 删除 appending 新增 appnd folding"), spoken


@ON_THE_PHONE
def test_a_long_project_key_shows_both_ends_in_the_phones_project_select(page: Page,
                                                                        alice_id: int,
                                                                        store: Store,
                                                                        device: str):
    store.add(alice_id, "部署前先跑 lint", scope="PROJECT", project_key=LONG_KEY)
    store.add(alice_id, "测试用 Vitest", scope="PROJECT", project_key="mao")
    page.goto(f"/settings/memory?scope=PROJECT&project={LONG_KEY}")
    select = page.locator("#memory-list").get_by_label("项目", exact=True)
    expect(select).to_have_value(LONG_KEY)
    # The text the closed select shows, measured in its own font, fits the room inside it.
    shown, room, needed = select.evaluate("""el => {
        const style = getComputedStyle(el);
        const text = el.selectedOptions[0].label;
        const context = document.createElement('canvas').getContext('2d');
        context.font = `${style.fontWeight} ${style.fontSize} ${style.fontFamily}`;
        const room = el.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight)
            - 20;  // the arrow
        return [text, room, context.measureText(text).width];
    }""")
    assert shown.startswith(LONG_KEY[:12]) and shown.endswith(LONG_KEY[-12:]), shown
    assert needed <= room, (shown, needed, room)
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    keep(page, "project-select-long-key", device)


@ON_THE_DESKTOP
def test_at_the_cap_the_add_dialog_says_so_before_typing(page: Page, alice_id: int,
                                                        store: Store):
    ids = store.add_many(alice_id, [f"第 {n} 条" for n in range(rules.ACTIVE_PER_USER_MAX)])
    page.goto("/settings/memory")
    page.get_by_role("button", name="新增记忆", exact=True).click()
    dialog = page.get_by_role("dialog", name="新增记忆")
    expect(dialog.locator("#memory-full")).to_be_visible()
    expect(dialog.locator("#memory-full")).to_contain_text(
        f"已达 {rules.ACTIVE_PER_USER_MAX} 条上限")
    expect(dialog.get_by_label("内容")).to_be_disabled()
    expect(dialog.get_by_role("button", name="保存", exact=True)).to_be_disabled()
    assert axe_violations(page) == []
    keep(page, "add-at-the-cap", "desktop")
    dialog.get_by_role("button", name="取消", exact=True).click()
    # One dismissed: a memory can be added again, and the dialog says nothing of the cap.
    page.locator(f"#memory-{ids[-1]}").get_by_role("button", name="忽略", exact=True).click()
    expect(page.locator("#memory-usage")).to_contain_text(
        f"{rules.ACTIVE_PER_USER_MAX - 1} / {rules.ACTIVE_PER_USER_MAX}")
    page.get_by_role("button", name="新增记忆", exact=True).click()
    expect(dialog.locator("#memory-full")).to_be_hidden()
    dialog.get_by_label("内容").fill("新的一条")
    dialog.get_by_role("button", name="保存", exact=True).click()
    expect(dialog).to_be_hidden()


@ON_THE_DESKTOP
def test_a_loading_tab_moves_nothing_beside_it(page: Page, alice_id: int, store: Store):
    store.add_many(alice_id, ["一条记忆", "另一条"])
    held: list[Route] = []
    page.goto("/settings/memory")
    search = page.get_by_role("searchbox", name="搜索记忆")
    tabs = page.get_by_role("navigation", name="范围").get_by_role("link")
    before = [search.bounding_box(), *(tab.bounding_box() for tab in tabs.all())]
    page.route("**/settings/memory?scope=USER*", lambda route: held.append(route))
    tab = tabs.filter(has_text="用户")
    tab.click()
    expect(tab).to_have_class(re.compile("htmx-request"))
    assert [search.bounding_box(), *(t.bounding_box() for t in tabs.all())] == before
    keep(page, "loading-tab", "desktop")
    held.pop().continue_()
    expect(tab).to_have_attribute("aria-current", "true")
