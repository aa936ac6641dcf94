"""Two tabs of one account never overwrite each other silently (SPEC §11): the tab that saves
over a change made in the other sees both wordings side by side and chooses — 保留我的 saves its
words on the memory as it is now, 用现在的 takes the stored ones; a status change or delete from
a row out of date does nothing and says what changed. Nothing typed is lost."""

from __future__ import annotations

import sqlalchemy as sa
from flask import Flask
from playwright.sync_api import Page, expect

from app.auth.models import LoginSession
from app.extensions import db
from tests.browser.axe import axe_violations
from tests.browser.checks import LOW_CONTRAST, check_targets_and_contrast
from tests.browser.conftest import ON_BOTH_SCREENS
from tests.browser.screens import keep
from tests.browser.test_dark_theme import BACKGROUND_LUMINANCE
from tests.conftest import PASSWORD
from tests.page_support import PageSession, Store

MEMORY = "/settings/memory"


def two_tabs(page: Page) -> tuple[Page, Page]:
    """Tab A (the test's page) and tab B, a second page of the same account, both open."""
    other = page.context.new_page()
    for tab in (page, other):
        tab.goto(MEMORY)
    return page, other


def edit_and_save(tab: Page, item: int, words: str) -> None:
    row = tab.locator(f"#memory-{item}")
    row.get_by_role("button", name="编辑", exact=True).click()
    row.locator("textarea").fill(words)
    row.get_by_role("button", name="保存", exact=True).click()
    expect(row.locator(".memory-content")).to_have_text(words)


def open_edit(tab: Page, item: int, words: str) -> None:
    row = tab.locator(f"#memory-{item}")
    row.get_by_role("button", name="编辑", exact=True).click()
    row.locator("textarea").fill(words)


ORIGINAL, THEIRS, MINE = "周报用中文写", "周报用中文写,附上数据表", "周报用英文写"


def edits_cross(page: Page, alice_id: int, store: Store) -> tuple[Page, int]:
    """Tab B opens an edit, tab A saves one, tab B saves its own: B's row shows the conflict."""
    item = store.add(alice_id, ORIGINAL)
    tab_a, tab_b = two_tabs(page)
    open_edit(tab_b, item, MINE)
    edit_and_save(tab_a, item, THEIRS)
    tab_b.locator(f"#memory-{item}").get_by_role("button", name="保存", exact=True).click()
    expect(tab_b.get_by_role("button", name="保留我的")).to_be_visible()
    return tab_b, item


def keep_row(tab: Page, item: int, name: str, device: str) -> None:
    """A screenshot for docs/screenshots/ with the whole row in view, from its top."""
    tab.locator(f"#memory-{item}").evaluate("row => row.scrollIntoView({block: 'start'})")
    keep(tab, name, device)


@ON_BOTH_SCREENS
def test_an_edit_saved_over_the_other_tabs_edit_shows_both_and_keep_mine_saves_mine(
        page: Page, alice_id: int, store: Store, device: str):
    tab_b, item = edits_cross(page, alice_id, store)
    row = tab_b.locator(f"#memory-{item}")
    expect(row.get_by_role("alert")).to_contain_text("这条记忆在你编辑时已在别处改动")
    expect(row.get_by_label("你写的")).to_have_value(MINE)
    expect(row.locator(".conflict-theirs")).to_contain_text(THEIRS)
    expect(row.get_by_role("button", name="用现在的")).to_be_visible()
    assert store.get(item)["content"] == THEIRS
    keep_row(tab_b, item, "conflict-edit", device)
    check_targets_and_contrast(tab_b)

    row.get_by_role("button", name="保留我的").click()
    expect(row.locator(".memory-content")).to_have_text(MINE)
    expect(tab_b.locator("#toast")).to_contain_text("已保存")
    stored = store.get(item)
    assert (stored["content"], stored["version"]) == (MINE, 3)


@ON_BOTH_SCREENS
def test_the_conflict_view_follows_the_dark_theme_with_the_same_contrast(
        page: Page, alice_id: int, store: Store, device: str):
    tab_b, item = edits_cross(page, alice_id, store)
    tab_b.emulate_media(color_scheme="dark")
    assert tab_b.evaluate(BACKGROUND_LUMINANCE) < 0.05
    assert tab_b.evaluate(LOW_CONTRAST) == []
    assert axe_violations(tab_b) == []
    keep_row(tab_b, item, "dark-conflict-edit", device)


def test_take_theirs_shows_the_stored_words_and_saves_nothing(page: Page, alice_id: int,
                                                              store: Store):
    tab_b, item = edits_cross(page, alice_id, store)
    row = tab_b.locator(f"#memory-{item}")
    row.get_by_role("button", name="用现在的").click()
    expect(row.locator(".memory-content")).to_have_text(THEIRS)
    expect(row.get_by_role("button", name="编辑", exact=True)).to_be_focused()
    stored = store.get(item)
    assert (stored["content"], stored["version"]) == (THEIRS, 2)


def test_leaving_a_conflict_asks_first_the_typed_words_are_unsaved(page: Page, alice_id: int,
                                                                   store: Store):
    tab_b, _ = edits_cross(page, alice_id, store)
    tab_b.get_by_role("link", name="已忽略").click()
    discard = tab_b.locator("#discard-dialog")
    expect(discard).to_be_visible()
    discard.get_by_role("button", name="继续编辑").click()
    expect(tab_b.get_by_label("你写的")).to_have_value(MINE)


@ON_BOTH_SCREENS
def test_a_dismiss_in_one_tab_then_an_edit_in_the_other_says_so_and_keeps_it_dismissed(
        page: Page, alice_id: int, store: Store, device: str):
    item = store.add(alice_id, "部署前先跑冒烟测试")
    tab_a, tab_b = two_tabs(page)
    open_edit(tab_b, item, "部署前先跑全部测试")
    tab_a.locator(f"#memory-{item}").get_by_role("button", name="忽略", exact=True).click()
    expect(tab_a.locator(f"#memory-{item}")).to_contain_text("已忽略「部署前先跑冒烟测试」")
    row = tab_b.locator(f"#memory-{item}")
    row.get_by_role("button", name="保存", exact=True).click()

    expect(row.get_by_role("alert")).to_contain_text("已在别处改动并忽略")
    expect(row.locator(".conflict-theirs")).to_contain_text("(已忽略)")
    expect(row.get_by_label("你写的")).to_have_value("部署前先跑全部测试")
    keep_row(tab_b, item, "conflict-dismissed", device)
    check_targets_and_contrast(tab_b)
    row.get_by_role("button", name="保留我的").click()
    expect(row.locator(".memory-content")).to_have_text("部署前先跑全部测试")
    stored = store.get(item)
    assert (stored["content"], stored["status"]) == ("部署前先跑全部测试", "DISMISSED")


def test_a_dismiss_from_a_row_the_other_tab_edited_says_what_changed(page: Page, alice_id: int,
                                                                     store: Store):
    item = store.add(alice_id, ORIGINAL)
    tab_a, tab_b = two_tabs(page)
    edit_and_save(tab_a, item, THEIRS)
    row = tab_b.locator(f"#memory-{item}")
    expect(row.locator(".memory-content")).to_have_text("周报用中文写")
    row.get_by_role("button", name="忽略", exact=True).click()

    expect(row.get_by_role("alert")).to_have_text(
        "这条记忆内容已在别处改成了下面这样,所以这次的「忽略」没有执行:请看清现在的样子再决定。")
    expect(row.locator(".memory-content")).to_have_text(THEIRS)
    check_targets_and_contrast(tab_b)
    assert store.get(item)["status"] == "ACTIVE"
    # Seen: now it applies.
    row.get_by_role("button", name="忽略", exact=True).click()
    expect(row).to_contain_text("已忽略「周报用中文写,附上数据表」")
    assert store.get(item)["status"] == "DISMISSED"


def test_an_edit_opened_from_a_row_the_other_tab_changed_says_it_shows_the_new_words(
        page: Page, alice_id: int, store: Store):
    item = store.add(alice_id, ORIGINAL)
    tab_a, tab_b = two_tabs(page)
    edit_and_save(tab_a, item, THEIRS)
    row = tab_b.locator(f"#memory-{item}")
    row.get_by_role("button", name="编辑", exact=True).click()
    expect(row.locator(".stale-note")).to_have_text("这条记忆已在别处改过:下面是现在保存的内容。")
    expect(row.locator("textarea")).to_have_value(THEIRS)


def test_a_delete_confirmed_after_the_other_tab_dismissed_it_says_so_and_keeps_it(
        page: Page, alice_id: int, store: Store):
    item = store.add(alice_id, "周报用中文写")
    tab_a, tab_b = two_tabs(page)
    row = tab_b.locator(f"#memory-{item}")
    row.get_by_role("button", name="删除", exact=True).click()
    expect(row).to_contain_text("确定删除「周报用中文写」吗?")
    tab_a.locator(f"#memory-{item}").get_by_role("button", name="忽略", exact=True).click()
    expect(tab_a.locator(f"#memory-{item}")).to_contain_text("已忽略")
    row.get_by_role("button", name="确认删除").click()

    expect(row.get_by_role("alert")).to_have_text(
        "这条记忆已在别处被忽略,所以这次的「删除」没有执行:请看清现在的样子再决定。")
    expect(row.get_by_role("button", name="恢复", exact=True)).to_be_visible()
    assert store.get(item)["status"] == "DISMISSED"


def test_an_edit_kept_over_an_expired_login_is_still_checked_against_changes_made_meanwhile(
        page: Page, app: Flask, alice_id: int, store: Store):
    item = store.add(alice_id, ORIGINAL)
    page.goto(MEMORY)
    open_edit(page, item, MINE)
    with app.app_context():
        db.session.execute(sa.delete(LoginSession))
        db.session.commit()
    page.locator(f"#memory-{item}").get_by_role("button", name="保存", exact=True).click()
    page.wait_for_url("**/login?**")
    # While the person logs in again, the memory is changed elsewhere.
    other = PageSession(app.test_client())
    other.login("alice")
    assert other.htmx("PATCH", f"{MEMORY}/items/{item}", {"content": THEIRS},
                      headers={"If-Match": '"1"'}).status_code == 200
    page.get_by_label("用户名").fill("alice")
    page.get_by_label("密码").fill(PASSWORD)
    page.get_by_role("button", name="登录", exact=True).click()

    row = page.locator(f"#memory-{item}")
    expect(row.locator("textarea")).to_have_value(MINE)
    row.get_by_role("button", name="保存", exact=True).click()
    expect(row.get_by_label("你写的")).to_have_value(MINE)
    expect(row.locator(".conflict-theirs")).to_contain_text(THEIRS)
    assert store.get(item)["content"] == THEIRS
