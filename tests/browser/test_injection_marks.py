"""SPEC §9 "What the agent gets, on the page": 已用 N / 200, the rows a new session would not get
today marked in their place, and both (with an open preview) following every change at once."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.browser.conftest import ON_BOTH_SCREENS
from tests.browser.screens import keep
from tests.page_support import Store

MARK = "超出注入上限,新会话暂不会带上"


@ON_BOTH_SCREENS
def test_rows_beyond_the_injection_caps_are_marked(page: Page, alice_id: int, store: Store,
                                                   device: str):
    users = store.add_many(alice_id, [f"用户偏好 {n}" for n in range(10)])
    projects = store.add_many(alice_id, [f"项目约定 {n}" for n in range(13)], scope="PROJECT",
                              project_key="shop")
    page.goto("/settings/memory")
    expect(page.locator("#memory-usage")).to_contain_text("已用 23 / 200")
    # Newest 8 USER rows and newest 12 of the project are sent; the older ones are marked.
    # Page 1: the 13 project rows and the 7 newest USER rows; the oldest project row is out.
    expect(page.locator(f"#memory-{projects[0]} .beyond-cap")).to_have_text(MARK)
    expect(page.locator(".beyond-cap")).to_have_count(1)
    page.goto("/settings/memory?page=2")
    marked = [f"#memory-{users[0]}", f"#memory-{users[1]}"]
    for selector in marked:
        expect(page.locator(selector).locator(".beyond-cap")).to_have_text(MARK)
    expect(page.locator(".beyond-cap")).to_have_count(2)
    page.goto("/settings/memory?scope=PROJECT")
    expect(page.locator(f"#memory-{projects[0]} .beyond-cap")).to_have_text(MARK)
    expect(page.locator(".beyond-cap")).to_have_count(1)
    page.locator(f"#memory-{projects[0]}").scroll_into_view_if_needed()
    keep(page, "injection-marks", device)


def test_the_marks_the_count_and_the_preview_follow_every_change(page: Page, alice_id: int,
                                                                  store: Store):
    users = store.add_many(alice_id, [f"用户偏好 {n}" for n in range(10)])
    page.goto("/settings/memory")
    page.get_by_text("新会话中 Agent 会看到").click()
    expect(page.locator("#preview-body")).to_contain_text("Agent 会看到 8 条记忆")
    expect(page.locator("#preview-body")).to_contain_text("另有 2 条生效中的记忆超出注入上限")
    expect(page.locator("#preview-body")).to_contain_text("用户偏好 9")
    expect(page.locator(f"#memory-{users[1]} .beyond-cap")).to_be_visible()

    page.locator(f"#memory-{users[9]}").get_by_role("button", name="忽略", exact=True).click()
    expect(page.locator("#memory-usage")).to_contain_text("已用 9 / 200")
    expect(page.locator("#preview-body")).to_contain_text("另有 1 条生效中的记忆超出注入上限")
    # The dismissed row leaves the open preview, and the next oldest row moves within the cap.
    expect(page.locator("#preview-body")).not_to_contain_text("用户偏好 9")
    expect(page.locator(f"#memory-{users[1]} .beyond-cap")).to_have_count(0)
    expect(page.locator(f"#memory-{users[0]} .beyond-cap")).to_be_visible()

    page.locator(f"#memory-{users[9]}").get_by_role("button", name="撤销", exact=True).click()
    expect(page.locator("#memory-usage")).to_contain_text("已用 10 / 200")
    expect(page.locator(f"#memory-{users[1]} .beyond-cap")).to_be_visible()
    expect(page.locator("#preview-body")).to_contain_text("用户偏好 9")

    # An edit makes a marked row the newest: it is sent, and the oldest sent one is not.
    row = page.locator(f"#memory-{users[0]}")
    row.get_by_role("button", name="编辑", exact=True).click()
    row.locator("textarea").fill("用户偏好 0,改过")
    row.get_by_role("button", name="保存", exact=True).click()
    expect(row.locator(".beyond-cap")).to_have_count(0)
    expect(page.locator(f"#memory-{users[2]} .beyond-cap")).to_be_visible()
    expect(page.locator("#preview-body")).to_contain_text("用户偏好 0,改过")
    keep(page, "injection-marks-follow", "desktop")
