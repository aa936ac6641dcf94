"""我的记忆, row by row: an action answers in its own row, keeps every other row (and an edit in
progress) as it was, leaves the focus where the person is, and a row is compact enough to scan."""

from __future__ import annotations

import re
from collections.abc import Callable

from playwright.sync_api import Dialog, Locator, Page, expect

from tests.browser.conftest import ON_BOTH_SCREENS
from tests.page_support import Store


def _focus_is_in(page: Page, row_id: int) -> None:
    """The focused element is the row `memory-<row_id>` or inside it."""
    page.wait_for_function(
        "id => document.activeElement && document.activeElement.closest('#memory-' + id)",
        arg=row_id)


def _rows(page: Page) -> Locator:
    return page.locator("li.memory-row")


@ON_BOTH_SCREENS
def test_dismiss_answers_in_the_row_and_undo_puts_it_back(page: Page, alice_id: int, store: Store,
                                                          shot: Callable[[str], None]):
    ids = store.add_many(alice_id, [f"第 {n} 条记忆" for n in range(25)])
    page.goto("/settings/memory")
    last = page.locator(f"#memory-{ids[5]}")
    expect(_rows(page).nth(19)).to_have_id(f"memory-{ids[5]}")
    last.get_by_role("button", name="忽略", exact=True).click()
    expect(last).to_contain_text("已忽略「第 5 条记忆」")
    expect(last).to_be_in_viewport()
    expect(page.locator("#memory-summary")).to_have_text("共 24 条")
    shot("dismiss-in-the-row")
    assert store.get(ids[5])["status"] == "DISMISSED"
    last.get_by_role("button", name="撤销", exact=True).click()
    expect(last.get_by_role("button", name="忽略", exact=True)).to_be_visible()
    expect(_rows(page).nth(19)).to_have_id(f"memory-{ids[5]}")
    expect(page.locator("#memory-summary")).to_have_text("共 25 条")
    assert store.get(ids[5])["status"] == "ACTIVE"


@ON_BOTH_SCREENS
def test_delete_is_confirmed_in_the_row_naming_the_memory(page: Page, alice_id: int, store: Store,
                                                          shot: Callable[[str], None]):
    kept, item = store.add_many(alice_id, ["留下的", "要删除的那条"])
    browser_dialogs: list[str] = []

    def refuse(dialog: Dialog) -> None:
        browser_dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", refuse)
    page.goto("/settings/memory")
    row = page.locator(f"#memory-{item}")
    row.get_by_role("button", name="删除", exact=True).click()
    expect(row).to_contain_text("确定删除「要删除的那条」吗?")
    shot("delete-confirm-in-the-row")
    row.get_by_role("button", name="取消", exact=True).click()
    expect(row.get_by_role("button", name="删除", exact=True)).to_be_visible()
    assert store.get(item) is not None
    row.get_by_role("button", name="删除", exact=True).click()
    row.get_by_role("button", name="确认删除", exact=True).click()
    expect(row).to_contain_text("已删除「要删除的那条」")
    expect(row).to_be_in_viewport()
    expect(page.locator("#memory-summary")).to_have_text("共 1 条")
    assert store.get(item) is None
    assert store.get(kept) is not None
    assert browser_dialogs == []


@ON_BOTH_SCREENS
def test_an_edit_in_progress_survives_actions_on_other_rows(page: Page, alice_id: int,
                                                            store: Store,
                                                            shot: Callable[[str], None]):
    other, edited = store.add_many(alice_id, ["别的那条", "正在改的那条"])
    page.goto("/settings/memory")
    row = page.locator(f"#memory-{edited}")
    row.get_by_role("button", name="编辑", exact=True).click()
    row.get_by_label("编辑内容").fill("改到一半的文字")
    with page.expect_response(re.compile(r"/status$")):
        page.locator(f"#memory-{other}").get_by_role("button", name="忽略", exact=True).click()
    expect(row.get_by_label("编辑内容")).to_have_value("改到一半的文字")
    expect(page.locator(f"#memory-{other}")).to_contain_text("已忽略")
    page.locator(f"#memory-{other}").get_by_role("button", name="撤销", exact=True).click()
    other_dismiss = page.locator(f"#memory-{other}").get_by_role("button", name="忽略", exact=True)
    expect(other_dismiss).to_be_visible()
    expect(row.get_by_label("编辑内容")).to_have_value("改到一半的文字")
    # A tab change would discard the typed text: the page asks first.
    page.get_by_role("link", name="用户", exact=True).click()
    warning = page.get_by_role("dialog", name="放弃未保存的修改?")
    expect(warning).to_be_visible()
    shot("discard-warning")
    warning.get_by_role("button", name="继续编辑", exact=True).click()
    expect(warning).to_be_hidden()
    expect(row.get_by_label("编辑内容")).to_have_value("改到一半的文字")
    page.get_by_role("link", name="用户", exact=True).click()
    warning.get_by_role("button", name="放弃修改", exact=True).click()
    expect(page).to_have_url(re.compile(r"/settings/memory\?scope=USER$"))
    expect(row.get_by_role("button", name="编辑", exact=True)).to_be_visible()
    assert store.get(edited)["content"] == "正在改的那条"


def test_a_tab_change_without_typed_text_asks_nothing(page: Page, alice_id: int, store: Store):
    item = store.add(alice_id, "只是打开看看")
    page.goto("/settings/memory")
    page.locator(f"#memory-{item}").get_by_role("button", name="编辑", exact=True).click()
    page.get_by_role("link", name="项目", exact=True).click()
    expect(page).to_have_url(re.compile(r"/settings/memory\?scope=PROJECT$"))
    expect(page.get_by_role("dialog", name="放弃未保存的修改?")).to_be_hidden()


@ON_BOTH_SCREENS
def test_focus_stays_on_the_row_after_each_action(page: Page, alice_id: int, store: Store,
                                                  shot: Callable[[str], None]):
    last, item, first = store.add_many(alice_id, ["最早的", "中间的", "最新的"])
    page.goto("/settings/memory")
    row = page.locator(f"#memory-{item}")
    row.get_by_role("button", name="编辑", exact=True).click()
    row.get_by_label("编辑内容").fill("中间的,改过")
    row.get_by_role("button", name="保存", exact=True).click()
    expect(row.locator(".memory-content")).to_have_text("中间的,改过")
    _focus_is_in(page, item)
    row.get_by_role("button", name="编辑", exact=True).click()
    row.get_by_role("button", name="取消", exact=True).click()
    _focus_is_in(page, item)
    row.get_by_role("button", name="忽略", exact=True).click()
    expect(row.get_by_role("button", name="撤销", exact=True)).to_be_focused()
    shot("focus-after-dismiss")
    row.get_by_role("button", name="撤销", exact=True).click()
    expect(row.get_by_role("button", name="忽略", exact=True)).to_be_focused()
    row.get_by_role("button", name="删除", exact=True).click()
    _focus_is_in(page, item)
    row.get_by_role("button", name="确认删除", exact=True).click()
    expect(row).to_contain_text("已删除")
    _focus_is_in(page, item)


@ON_BOTH_SCREENS
def test_escape_cancels_and_ctrl_enter_saves_an_inline_edit(page: Page, alice_id: int,
                                                            store: Store):
    item = store.add(alice_id, "原来的内容")
    page.goto("/settings/memory")
    row = page.locator(f"#memory-{item}")
    row.get_by_role("button", name="编辑", exact=True).click()
    box = row.get_by_label("编辑内容")
    box.fill("不要这些字")
    box.press("Escape")
    expect(row.locator(".memory-content")).to_have_text("原来的内容")
    expect(row.get_by_role("button", name="编辑", exact=True)).to_be_focused()
    page.keyboard.press("Enter")
    box = row.get_by_label("编辑内容")
    expect(box).to_be_focused()
    box.fill("用键盘保存的")
    box.press("Control+Enter")
    expect(row.locator(".memory-content")).to_have_text("用键盘保存的")
    assert store.get(item)["content"] == "用键盘保存的"


@ON_BOTH_SCREENS
def test_rows_are_compact_enough_to_scan(page: Page, alice_id: int, store: Store, device: str,
                                         shot: Callable[[str], None]):
    store.add_many(alice_id, [f"第 {n} 条:一条不长的记忆" for n in range(30)])
    page.goto("/settings/memory")
    row = _rows(page).first
    height = row.bounding_box()["height"]
    assert height <= (80 if device == "desktop" else 124), height
    # Meta and actions share one line under the content on a desktop.
    if device == "desktop":
        meta = row.locator(".memory-meta").bounding_box()
        action = row.get_by_role("button", name="编辑", exact=True).bounding_box()
        assert action["y"] < meta["y"] + meta["height"] and meta["y"] < action["y"] + \
            action["height"], (meta, action)
        visible = _rows(page).evaluate_all(
            "rows => rows.filter(r => r.getBoundingClientRect().bottom <= innerHeight).length")
        assert visible >= 6, visible
    shot("compact-rows")


def test_row_actions_are_quiet_until_hover_or_focus(page: Page, alice_id: int, store: Store):
    store.add_many(alice_id, ["第一条", "第二条"])
    page.goto("/settings/memory")
    button = _rows(page).first.get_by_role("button", name="编辑", exact=True)

    def border_alpha() -> float:
        color = button.evaluate("b => getComputedStyle(b).borderTopColor")
        parts = color[color.index("(") + 1:-1].split(",")
        return float(parts[3]) if len(parts) == 4 else 1.0

    page.mouse.move(0, 0)
    assert border_alpha() == 0
    _rows(page).first.hover()
    expect(button).not_to_have_css("border-top-color", "rgba(0, 0, 0, 0)")
    assert border_alpha() > 0
    page.mouse.move(0, 0)
    _rows(page).nth(1).get_by_role("button", name="编辑", exact=True).focus()
    expect(_rows(page).nth(1).get_by_role("button", name="忽略", exact=True)).not_to_have_css(
        "border-top-color", "rgba(0, 0, 0, 0)")
