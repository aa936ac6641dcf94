"""我的记忆 in a real browser: a person manages their memories entirely from the page."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.sync_api import Page, Route, expect

from tests.browser.conftest import log_in
from tests.conftest import Accounts
from tests.page_support import Store


def _open(page: Page) -> None:
    page.goto("/settings/memory")


def _open_dialog(page: Page):
    page.get_by_role("button", name="新增记忆", exact=True).click()
    dialog = page.get_by_role("dialog", name="新增记忆")
    expect(dialog).to_be_visible()
    return dialog


def test_login_lands_on_my_memory_with_an_explained_empty_state(page: Page, users: Accounts):
    users.user("alice")
    page.goto("/settings/memory")
    expect(page).to_have_url(re.compile(r"/login\?next=/settings/memory$"))
    page.get_by_label("用户名").fill("alice")
    page.get_by_label("密码").fill("wrong")
    page.get_by_role("button", name="登录", exact=True).click()
    expect(page.get_by_role("alert")).to_have_text("用户名或密码错误,请重新输入密码。")
    log_in(page, "alice")
    expect(page.get_by_role("heading", name="我的记忆")).to_be_visible()
    expect(page.get_by_text("还没有记忆")).to_be_visible()
    expect(page.get_by_text("「自动收集」默认关闭")).to_be_visible()


def test_added_user_memory_is_listed(page: Page, alice_id: int, store: Store):
    _open(page)
    dialog = _open_dialog(page)
    dialog.get_by_label("内容").fill("回答请用中文")
    expect(dialog.locator("output")).to_have_text("6 / 500")
    dialog.get_by_role("button", name="保存", exact=True).click()
    expect(dialog).to_be_hidden()
    row = page.locator(".memory-row").first
    expect(row.locator(".memory-content")).to_have_text("回答请用中文")
    expect(row.locator(".badge")).to_have_text("手动")
    expect(page.locator("#toast")).to_contain_text("已新增记忆")
    [item] = store.of(alice_id)
    assert (item["scope"], item["source"], item["status"]) == ("USER", "MANUAL", "ACTIVE")
    # The dialog starts empty again for the next one.
    dialog = _open_dialog(page)
    expect(dialog.get_by_label("内容")).to_have_value("")
    expect(dialog.locator("output")).to_have_text("0 / 500")


def test_project_memory_picks_a_project(page: Page, alice_id: int, store: Store):
    store.session(alice_id, "mao", 1)
    store.session(alice_id, "zeta", 2)
    store.session(alice_id, "weixin-bot", 3)
    _open(page)
    dialog = _open_dialog(page)
    dialog.get_by_label("范围").select_option("PROJECT")
    project = dialog.get_by_label("项目", exact=True)
    # The field arrives with its options (htmx), a moment after the scope changes.
    expect(dialog.locator("datalist option")).to_have_count(2)
    offered = dialog.locator("datalist option").evaluate_all("os => os.map(o => o.value)")
    assert offered == ["mao", "zeta"]
    project.fill("zeta")
    dialog.get_by_label("内容").fill("测试用 Vitest")
    dialog.get_by_role("button", name="保存", exact=True).click()
    expect(dialog).to_be_hidden()
    expect(page.locator(".memory-row").first).to_contain_text("项目 · zeta")
    [item] = store.of(alice_id)
    assert (item["scope"], item["projectKey"]) == ("PROJECT", "zeta")


def test_a_save_clicked_while_the_project_field_loads_is_not_lost(page: Page, alice_id: int,
                                                                  store: Store):
    # A slow server: the project field of a scope change is still on its way when the person
    # clicks 保存. The save must go, not be dropped as a second request of the form.
    held: list[Route] = []
    page.route("**/projects?*", lambda route: held.append(route))
    _open(page)
    dialog = _open_dialog(page)
    dialog.get_by_label("范围").select_option("PROJECT")
    dialog.get_by_label("范围").select_option("USER")
    dialog.get_by_label("内容").fill("回答请用中文")
    dialog.get_by_role("button", name="保存", exact=True).click()
    expect(dialog).to_be_hidden()
    expect(page.locator("#toast")).to_contain_text("已新增记忆")
    assert held, "the project field was not held back: the test did not test"
    for route in held:
        route.continue_()
    [item] = store.of(alice_id)
    assert (item["content"], item["scope"]) == ("回答请用中文", "USER")


def test_refused_memory_keeps_what_was_typed_in_the_dialog(page: Page, alice_id: int,
                                                          store: Store):
    store.add(alice_id, "回答请用中文")
    _open(page)
    dialog = _open_dialog(page)
    dialog.get_by_label("内容").fill("回答请用中文")
    dialog.get_by_role("button", name="保存", exact=True).click()
    expect(dialog.get_by_role("alert")).to_contain_text("已有相同内容的记忆")
    expect(dialog.get_by_label("内容")).to_have_value("回答请用中文")
    too_long = "长" * 501
    dialog.get_by_label("内容").fill(too_long)
    expect(dialog.locator("output")).to_have_text("501 / 500")
    expect(dialog.locator("output")).to_have_class("over")
    expect(dialog.get_by_role("button", name="保存", exact=True)).to_be_disabled()
    expect(dialog.get_by_label("内容")).to_have_value(too_long)
    assert len(store.of(alice_id)) == 1


def test_add_dialog_works_from_the_keyboard(page: Page, alice_id: int):
    _open(page)
    page.get_by_role("button", name="新增记忆", exact=True).focus()
    page.keyboard.press("Enter")
    dialog = page.get_by_role("dialog", name="新增记忆")
    expect(dialog).to_be_visible()
    expect(dialog.get_by_label("范围")).to_be_focused()
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()


def test_inline_edit_saves_only_that_row(page: Page, alice_id: int, store: Store):
    first, second = store.add_many(alice_id, ["第一条", "第二条"])
    _open(page)
    row = page.locator(f"#memory-{first}")
    row.get_by_role("button", name="编辑", exact=True).click()
    box = row.get_by_label("编辑内容")
    expect(box).to_be_focused()
    box.fill("改过的第一条")
    row.get_by_role("button", name="保存", exact=True).click()
    expect(row.locator(".memory-content")).to_have_text("改过的第一条")
    expect(page.locator(f"#memory-{second} .memory-content")).to_have_text("第二条")
    assert store.get(first)["content"] == "改过的第一条"
    # 取消 puts the row back as it was.
    row.get_by_role("button", name="编辑", exact=True).click()
    row.get_by_label("编辑内容").fill("不要这个")
    row.get_by_role("button", name="取消", exact=True).click()
    expect(row.locator(".memory-content")).to_have_text("改过的第一条")


def test_dismissed_memory_is_under_dismissed_and_can_be_restored(page: Page, alice_id: int,
                                                                store: Store):
    item = store.add(alice_id, "要忽略的")
    _open(page)
    row = page.locator(f"#memory-{item}")
    row.get_by_role("button", name="忽略", exact=True).click()
    expect(row).to_contain_text("已忽略「要忽略的」,Agent 不再使用它。")
    page.get_by_role("link", name="已忽略").click()
    expect(page).to_have_url(re.compile(r"/settings/memory\?status=DISMISSED$"))
    expect(row.get_by_role("button", name="恢复", exact=True)).to_be_visible()
    page.reload()
    expect(row.get_by_role("button", name="恢复", exact=True)).to_be_visible()
    row.get_by_role("button", name="恢复", exact=True).click()
    expect(row).to_contain_text("已恢复「要忽略的」,Agent 会再次使用它。")
    page.get_by_role("link", name="生效中").click()
    expect(row.get_by_role("button", name="忽略", exact=True)).to_be_visible()
    assert store.get(item)["status"] == "ACTIVE"


def test_back_button_returns_to_the_previous_view(page: Page, alice_id: int,
                                                  store: Store):
    store.add(alice_id, "用户级的")
    store.add(alice_id, "项目级的", scope="PROJECT", project_key="mao")
    _open(page)
    page.get_by_role("link", name="项目", exact=True).click()
    expect(page).to_have_url(re.compile(r"\?scope=PROJECT$"))
    expect(page.get_by_text("用户级的")).to_have_count(0)
    page.go_back()
    expect(page).to_have_url(re.compile(r"/settings/memory$"))
    expect(page.get_by_text("用户级的")).to_be_visible()
    page.go_forward()
    expect(page.get_by_text("用户级的")).to_have_count(0)
    expect(page.get_by_text("项目级的")).to_be_visible()


def test_auto_capture_toggle_persists_after_reload(page: Page, alice_id: int):
    _open(page)
    switch = page.get_by_role("switch", name="自动收集")
    expect(switch).to_have_attribute("aria-checked", "false")
    switch.click()
    expect(switch).to_have_attribute("aria-checked", "true")
    expect(page.get_by_text("已开启")).to_be_visible()
    page.reload()
    expect(page.get_by_role("switch", name="自动收集")).to_have_attribute("aria-checked", "true")
    page.get_by_role("switch", name="自动收集").click()
    expect(switch).to_have_attribute("aria-checked", "false")
    page.reload()
    expect(page.get_by_role("switch", name="自动收集")).to_have_attribute("aria-checked", "false")


def test_script_content_is_rendered_as_text(page: Page, alice_id: int, store: Store):
    stored = '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2">'
    item = store.add(alice_id, stored)
    _open(page)
    expect(page.locator(f"#memory-{item} .memory-content")).to_have_text(stored)
    typed = "<script>window.pwned = 3</script>"
    dialog = _open_dialog(page)
    dialog.get_by_label("内容").fill(typed)
    dialog.get_by_role("button", name="保存", exact=True).click()
    expect(page.locator(".memory-row").first.locator(".memory-content")).to_have_text(typed)
    page.locator(f"#memory-{item}").get_by_role("button", name="编辑", exact=True).click()
    expect(page.locator(f"#memory-{item}").get_by_label("编辑内容")).to_have_value(stored)
    assert page.evaluate("window.pwned") is None


def test_memory_page_screenshots(page: Page, alice_id: int, store: Store,
                                 artifacts: Path):
    store.add(alice_id, "这个项目的测试用 Vitest,提交前先跑 pnpm test", scope="PROJECT",
                 project_key="mao", source="AUTO")
    store.add(alice_id, "用户偏好简洁的回答,先给结论再给理由", source="CONSOLIDATED")
    store.add(alice_id, "回答请用中文")
    _open(page)
    expect(page.locator(".memory-row")).to_have_count(3)
    page.screenshot(path=artifacts / "memory-page.png", full_page=True)
    _open_dialog(page)
    page.screenshot(path=artifacts / "memory-dialog.png")
    page.keyboard.press("Escape")
    page.set_viewport_size({"width": 390, "height": 844})
    page.screenshot(path=artifacts / "memory-page-phone.png", full_page=True)
    # At phone width nothing scrolls sideways.
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
