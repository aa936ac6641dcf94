"""新增记忆: one request per save, a fresh dialog each time, a project picker that offers every
project the person has and takes a new one, and 保存 disabled only when it can only fail."""

from __future__ import annotations

from collections.abc import Callable

from playwright.sync_api import Locator, Page, Request, expect

from tests.browser.conftest import ON_BOTH_SCREENS
from tests.page_support import Store


def _open_dialog(page: Page) -> Locator:
    page.get_by_role("button", name="新增记忆", exact=True).click()
    dialog = page.get_by_role("dialog", name="新增记忆")
    expect(dialog).to_be_visible()
    return dialog


@ON_BOTH_SCREENS
def test_double_click_on_save_sends_one_request(page: Page, alice_id: int, store: Store,
                                                shot: Callable[[str], None]):
    posts: list[str] = []

    def count(request: Request) -> None:
        if request.method == "POST":
            posts.append(request.url)

    page.on("request", count)
    page.goto("/settings/memory")
    dialog = _open_dialog(page)
    dialog.get_by_label("内容").fill("回答请用中文")
    dialog.get_by_role("button", name="保存", exact=True).dblclick()
    expect(dialog).to_be_hidden()
    expect(page.locator("li.memory-row")).to_have_count(1)
    expect(page.get_by_role("alert")).to_have_count(0)
    shot("saved-once")
    assert len(posts) == 1, posts
    assert len(store.of(alice_id)) == 1


@ON_BOTH_SCREENS
def test_the_add_dialog_opens_fresh_each_time(page: Page, alice_id: int, store: Store,
                                              shot: Callable[[str], None]):
    store.add(alice_id, "回答请用中文")
    page.goto("/settings/memory")
    dialog = _open_dialog(page)
    dialog.get_by_label("内容").fill("回答请用中文")
    dialog.get_by_role("button", name="保存", exact=True).click()
    expect(dialog.get_by_role("alert")).to_contain_text("已有相同内容的记忆")
    shot("add-dialog-refused")
    dialog.get_by_role("button", name="取消", exact=True).click()
    expect(dialog).to_be_hidden()
    dialog = _open_dialog(page)
    expect(dialog.get_by_label("内容")).to_have_value("")
    expect(dialog.get_by_role("alert")).to_have_count(0)
    expect(dialog.locator("output")).to_have_text("0 / 500")
    dialog.get_by_label("范围").select_option("PROJECT")
    dialog.get_by_label("项目", exact=True).fill("mao")
    page.keyboard.press("Escape")
    dialog = _open_dialog(page)
    expect(dialog.get_by_label("范围")).to_have_value("USER")
    expect(dialog.get_by_label("项目", exact=True)).to_have_count(0)


@ON_BOTH_SCREENS
def test_project_picker_offers_own_and_reported_projects_and_takes_a_new_one(
        page: Page, alice_id: int, store: Store, shot: Callable[[str], None]):
    store.add(alice_id, "旧项目里的记忆", scope="PROJECT", project_key="legacy")
    store.session(alice_id, "mao", 1)
    store.session(alice_id, "weixin-bot", 2)
    page.goto("/settings/memory")
    dialog = _open_dialog(page)
    dialog.get_by_label("范围").select_option("PROJECT")
    project = dialog.get_by_label("项目", exact=True)
    expect(project).to_be_editable()
    offered = dialog.locator("datalist option").evaluate_all("os => os.map(o => o.value)")
    assert offered == ["legacy", "mao"]
    dialog.get_by_label("内容").fill("这个新项目用 Deno")
    project.fill("brand-new")
    shot("project-picker")
    dialog.get_by_role("button", name="保存", exact=True).click()
    expect(dialog).to_be_hidden()
    made = [m for m in store.of(alice_id) if m["content"] == "这个新项目用 Deno"]
    assert [(m["scope"], m["projectKey"]) for m in made] == [("PROJECT", "brand-new")]


@ON_BOTH_SCREENS
def test_save_is_disabled_only_when_it_can_only_fail(page: Page, alice_id: int,
                                                     shot: Callable[[str], None]):
    page.goto("/settings/memory")
    dialog = _open_dialog(page)
    save = dialog.get_by_role("button", name="保存", exact=True)
    content = dialog.get_by_label("内容")
    expect(save).to_be_disabled()
    content.fill("  \n ")
    expect(save).to_be_disabled()
    content.fill("长" * 500)
    expect(save).to_be_enabled()
    content.fill("长" * 501)
    expect(save).to_be_disabled()
    expect(dialog.locator("output")).to_have_text("501 / 500")
    shot("save-disabled-over-the-limit")
    content.fill("这个项目用 pnpm")
    dialog.get_by_label("范围").select_option("PROJECT")
    project = dialog.get_by_label("项目", exact=True)
    expect(save).to_be_disabled()
    project.fill("weixin-bot")
    # Not certain to fail by what the page knows: the service decides, and says why.
    expect(save).to_be_enabled()
    save.click()
    expect(dialog.get_by_role("alert")).to_contain_text("机器人")
