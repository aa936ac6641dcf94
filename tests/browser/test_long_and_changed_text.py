"""Long and changed text read well: a long rewording shows what changed, a long memory is clamped
on a phone with 展开, and an agent's memory the user edited says so."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import ON_BOTH_SCREENS
from tests.browser.screens import keep
from tests.page_support import Store

LONG = "这个项目的部署流程是先在预发环境验证,再由值班同学手动发布到生产环境。" * 8


@ON_BOTH_SCREENS
def test_a_long_edit_shows_in_history_what_changed(page: Page, alice_id: int, store: Store,
                                                   device: str):
    item = store.add(alice_id, LONG)
    page.goto("/settings/memory")
    row = page.locator(f"#memory-{item}")
    row.get_by_role("button", name="编辑", exact=True).click()
    row.locator("textarea").fill(LONG.replace("值班同学", "发布负责人", 1))
    row.get_by_role("button", name="保存", exact=True).click()
    expect(page.locator("#toast")).to_contain_text("已保存")
    row.get_by_text("来源与历史").click()
    change = row.locator(".changes li").last
    expect(change.locator(".diff del")).to_have_text("值班同学")
    expect(change.locator(".diff ins")).to_have_text("发布负责人")
    # The unchanged text is not repeated whole: the change reads in a line or two.
    assert len(change.locator(".diff").inner_text()) < 80
    expect(change.locator("details.whole-texts")).not_to_have_attribute("open", "")
    change.scroll_into_view_if_needed()
    keep(page, "history-diff", device)


@pytest.mark.parametrize("device", ["phone"], indirect=True)
def test_a_long_memory_is_clamped_on_a_phone_with_expand(page: Page, alice_id: int,
                                                         store: Store):
    long, short = store.add_many(alice_id, [LONG[:500], "短的一条"])
    page.goto("/settings/memory")
    text = page.locator(f"#memory-{long} .memory-content")
    box = text.bounding_box()
    assert box is not None and box["height"] < 160
    expand = page.locator(f"#memory-{long}").get_by_role("button", name="展开", exact=True)
    short_expand = page.locator(f"#memory-{short}").get_by_role("button", name="展开", exact=True)
    expect(short_expand).to_have_count(0)
    keep(page, "long-memory-clamped", "phone")
    expand.click()
    box = text.bounding_box()
    assert box is not None and box["height"] > 250
    collapse = page.locator(f"#memory-{long}").get_by_role("button", name="收起", exact=True)
    expect(collapse).to_be_visible()


def test_an_agents_memory_the_user_edited_says_so(page: Page, alice_id: int, store: Store):
    auto, untouched = store.add_many(alice_id, ["Agent 学到的", "Agent 学到的另一条"],
                                     source="AUTO")
    page.goto("/settings/memory")
    row = page.locator(f"#memory-{auto}")
    expect(row.locator(".badge")).to_have_text("自动")
    row.get_by_role("button", name="编辑", exact=True).click()
    row.locator("textarea").fill("我改过的")
    row.get_by_role("button", name="保存", exact=True).click()
    expect(row.locator(".badge")).to_have_text("自动 · 已编辑")
    page.reload()
    expect(row.locator(".badge")).to_have_text("自动 · 已编辑")
    expect(page.locator(f"#memory-{untouched} .badge")).to_have_text("自动")
