"""我的记忆 and the admin pages on a phone (390×844): nothing wider than the screen, dialogs and the
toast whole, tables as cards, the toast clear of the row acted on, menus on one line, and a
tapped button not left looking pressed."""

from __future__ import annotations

import pytest
from flask import Flask
from playwright.sync_api import Page, expect

from app.extensions import db
from app.extraction.models import JobOutcome
from tests.browser.conftest import ON_BOTH_SCREENS, hand_session_to
from tests.browser.screens import keep
from tests.conftest import Accounts
from tests.page_support import Store

LONG_KEY = "github.com/example-organisation/a-rather-long-repository-name-xy"
PAGE_WIDTH = "document.documentElement.scrollWidth"


def _screen(page: Page) -> int:
    """The screen's width (a phone's window.innerWidth grows with a page too wide for it)."""
    viewport = page.viewport_size
    assert viewport is not None
    return viewport["width"]


def _within_window(page: Page, selector: str) -> None:
    box = page.locator(selector).bounding_box()
    assert box is not None
    width = _screen(page)
    assert box["x"] >= 0 and box["x"] + box["width"] <= width, (selector, box, width)


@ON_BOTH_SCREENS
def test_a_long_project_key_wraps_and_the_page_fits_the_screen(page: Page, alice_id: int,
                                                                store: Store, device: str):
    assert len(LONG_KEY) == 64
    store.add_many(alice_id, ["这个项目的测试用 Vitest", "部署前先跑 lint"], scope="PROJECT",
                   project_key=LONG_KEY)
    page.goto("/settings/memory?scope=PROJECT")
    assert page.evaluate(PAGE_WIDTH) <= _screen(page)
    page.get_by_text("新会话中 Agent 会看到").click()
    # The panel's first answer (no project yet) lands before the choice, not after it.
    expect(page.locator("#preview-body")).to_contain_text("Agent")
    expect(page.locator("#preview-body")).not_to_have_attribute("aria-busy", "true")
    page.locator("#preview-project").select_option(LONG_KEY)
    expect(page.locator("#preview-body")).to_contain_text("部署前先跑 lint")
    assert page.evaluate(PAGE_WIDTH) <= _screen(page)
    keep(page, "phone-long-key", device, full_page=True)

    page.get_by_role("button", name="新增记忆", exact=True).click()
    expect(page.locator("#memory-dialog")).to_be_visible()
    _within_window(page, "#memory-dialog")
    page.locator("#memory-dialog").get_by_role("button", name="取消", exact=True).click()

    row = page.locator("li.memory-row").first
    row.get_by_role("button", name="编辑", exact=True).click()
    row.get_by_role("button", name="保存", exact=True).click()
    expect(page.locator("#toast .toast-message")).to_be_visible()
    _within_window(page, "#toast .toast-message")


def test_the_outcomes_table_turns_into_cards_on_a_phone(page: Page, app: Flask,
                                                        live_server: str, users: Accounts):
    users.user("root", admin=True)
    with app.app_context():
        db.session.add(JobOutcome(
            kind="extraction", job_id="job-phone", user_id=7, status="failed",
            reason="model_error", attempts=3, inserted=0, touched=0, updated=0, dropped=0,
            demoted=0, duration_ms=12345, model="a-model-with-a-rather-long-name-2026-01",
            total_tokens=1234, prompt_tokens=1000, completion_tokens=234))
        db.session.commit()
    hand_session_to(page, app, live_server, "root")
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto("/admin/outcomes")
    assert page.evaluate(PAGE_WIDTH) <= 390
    for label in ("原因", "模型", "Tokens", "耗时"):
        cell = page.locator(f"table.outcomes td[data-label='{label}']")
        box = cell.bounding_box()
        assert box is not None and box["x"] + box["width"] <= 390, (label, box)
    # The menu: brand and 退出 on one line, all four pages on the next, none broken in two.
    links = page.get_by_role("navigation", name="主导航").get_by_role("link")
    tops = {round(links.nth(n).bounding_box()["y"]) for n in range(links.count())}
    heights = {round(links.nth(n).bounding_box()["height"]) for n in range(links.count())}
    assert len(tops) == 1 and max(heights) <= 48, (tops, heights)
    keep(page, "phone-outcomes", "phone")


@ON_BOTH_SCREENS
def test_the_toast_leaves_the_row_acted_on_in_reach(page: Page, alice_id: int, store: Store,
                                                    device: str):
    store.add_many(alice_id, [f"第 {n} 条记忆" for n in range(20)])
    page.goto("/settings/memory")
    # The row whose buttons sit lowest in the window, right above where the toast appears.
    rows = page.locator("li.memory-row")
    height = page.evaluate("window.innerHeight")
    target = None
    for n in range(rows.count()):
        box = rows.nth(n).get_by_role("button", name="编辑", exact=True).bounding_box()
        if box and box["y"] + box["height"] <= height:
            target = rows.nth(n)
    assert target is not None
    target.get_by_role("button", name="编辑", exact=True).click()
    target.locator("textarea").fill("改过的内容")
    target.get_by_role("button", name="保存", exact=True).click()
    undo = target.get_by_role("button", name="编辑", exact=True)
    expect(undo).to_be_focused()
    expect(page.locator("#toast .toast-message")).to_be_visible()
    page.wait_for_timeout(100)
    toast = page.locator("#toast .toast-message").bounding_box()
    button = undo.bounding_box()
    assert toast is not None and button is not None
    assert button["y"] + button["height"] <= toast["y"], (button, toast)
    keep(page, "toast-clear-of-row", device)


def test_a_notice_with_a_link_stays_until_used(page: Page, alice_id: int, store: Store):
    store.add(alice_id, "已忽略的那条", status="DISMISSED")
    page.clock.install()
    page.goto("/settings/memory?status=DISMISSED")
    page.get_by_role("button", name="新增记忆", exact=True).click()
    page.locator("#memory-content").fill("新加的一条")
    page.locator("#memory-dialog").get_by_role("button", name="保存", exact=True).click()
    link = page.locator("#toast").get_by_role("link", name="去看看")
    expect(link).to_be_visible()
    page.clock.run_for(20_000)
    expect(link).to_be_visible()
    link.click()
    expect(page.locator("li.memory-row").first).to_contain_text("新加的一条")


# Button :hover rules that apply on a screen without hover. Chromium keeps :hover on the element
# last tapped, so any of them leaves a tapped button looking pressed (a headless browser does not
# reproduce the stickiness itself, so the rules are what is checked).
HOVER_RULES_ON_TOUCH = """() => {
    const found = [];
    const walk = (rules) => { for (const rule of rules) {
        if (rule instanceof CSSMediaRule) {
            if (matchMedia(rule.conditionText).matches) walk(rule.cssRules);
        } else if (rule.selectorText && /:hover/.test(rule.selectorText)
                   && /button/.test(rule.selectorText)) { found.push(rule.selectorText); }
    } };
    for (const sheet of document.styleSheets) walk(sheet.cssRules);
    return found;
}"""


@pytest.mark.parametrize("device", ["phone"], indirect=True)
def test_a_tapped_button_does_not_stay_highlighted(page: Page, alice_id: int, store: Store):
    assert page.evaluate("matchMedia('(hover: none)').matches")
    store.add(alice_id, "一条记忆")
    page.goto("/settings/memory")
    assert page.evaluate(HOVER_RULES_ON_TOUCH) == []
    opener = page.get_by_role("button", name="新增记忆", exact=True)
    plain = opener.evaluate("el => getComputedStyle(el).backgroundColor")
    opener.tap()
    page.locator("#memory-dialog").get_by_role("button", name="取消", exact=True).tap()
    expect(page.locator("#memory-dialog")).to_be_hidden()
    assert opener.evaluate("el => getComputedStyle(el).backgroundColor") == plain


@pytest.mark.parametrize("device", ["phone"], indirect=True)
def test_touch_targets_are_44_px_on_a_phone(page: Page, alice_id: int, store: Store):
    store.add_many(alice_id, ["一条记忆", "另一条"])
    page.goto("/settings/memory")
    small = page.evaluate("""() => [...document.querySelectorAll(
        'button, .tabs a, .segmented a, input, select, summary')]
        .filter(el => el.offsetParent !== null && !el.closest('.visually-hidden'))
        .map(el => [el.textContent.trim() || el.name || el.id, el.getBoundingClientRect()])
        .filter(([, box]) => box.height < 44 || box.width < 44)
        .map(([name, box]) => name + ' ' + Math.round(box.width) + 'x' + Math.round(box.height))""")
    assert small == []
