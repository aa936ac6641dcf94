"""What the pages tell a person is Chinese, in view, and says what to do next."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from flask import Flask
from playwright.sync_api import Locator, Page, expect

from app.extensions import db
from app.memory import service
from app.system import service as system
from tests.browser.conftest import ON_BOTH_SCREENS
from tests.page_support import Store

# A run of Latin letters: an English word where a Chinese sentence belongs.
ENGLISH = re.compile(r"[A-Za-z]{3,}")


def _reads_chinese(message: Locator) -> str:
    expect(message).to_be_visible()
    text = message.inner_text()
    assert re.search(r"[\u4e00-\u9fff]", text) and not ENGLISH.search(text), text
    return text


@ON_BOTH_SCREENS
def test_refusals_read_in_chinese_where_the_person_acted(page: Page, app: Flask, alice_id: int,
                                                         store: Store,
                                                         shot: Callable[[str], None]):
    item, gone = store.add_many(alice_id, ["原来的内容", "别处删掉的"])
    page.goto("/settings/memory")
    # Content that is nothing but an ideographic space is empty.
    row = page.locator(f"#memory-{item}")
    row.get_by_role("button", name="编辑", exact=True).click()
    row.get_by_label("编辑内容").fill("\u3000")
    row.get_by_role("button", name="保存", exact=True).click()
    assert "不能为空" in _reads_chinese(row.get_by_role("alert"))
    row.get_by_role("button", name="取消", exact=True).click()
    # A memory deleted meanwhile.
    with app.app_context():
        service.delete_item(alice_id, gone)
        db.session.remove()
    page.locator(f"#memory-{gone}").get_by_role("button", name="编辑", exact=True).click()
    toast = page.locator("#toast").get_by_role("alert")
    assert "已不存在" in _reads_chinese(toast)
    expect(toast).to_be_in_viewport()
    # A page open for so long that its CSRF token no longer matches.
    page.evaluate("document.body.setAttribute('hx-headers', "
                  "JSON.stringify({'X-CSRF-Token': 'expired'}))")
    row.get_by_role("button", name="忽略", exact=True).click()
    assert "页面已过期" in _reads_chinese(toast)
    expect(toast).to_be_in_viewport()
    shot("refused-expired-page")
    assert store.get(item)["status"] == "ACTIVE"
    # A bot channel is not a project.
    page.reload()
    page.get_by_role("button", name="新增记忆", exact=True).click()
    dialog = page.get_by_role("dialog", name="新增记忆")
    dialog.get_by_label("范围").select_option("PROJECT")
    dialog.get_by_label("项目", exact=True).fill("weixin-bot")
    dialog.get_by_label("内容").fill("机器人的记忆")
    dialog.get_by_role("button", name="保存", exact=True).click()
    assert "机器人" in _reads_chinese(dialog.get_by_role("alert"))
    shot("refused-bot-project")


@ON_BOTH_SCREENS
def test_a_bad_address_gets_a_chinese_page(page: Page, alice_id: int,
                                           shot: Callable[[str], None]):
    response = page.goto("/settings/memory?status=GONE")
    assert response is not None and response.status == 400
    _reads_chinese(page.locator("main"))
    shot("bad-filter-page")


@ON_BOTH_SCREENS
@pytest.mark.parametrize("key_set", [False, True])
def test_auto_capture_says_beside_the_switch_when_nothing_can_be_captured(
        page: Page, app: Flask, alice_id: int, monkeypatch: pytest.MonkeyPatch,
        shot: Callable[[str], None], key_set: bool):
    if key_set:
        monkeypatch.setenv("OPENAI_API_KEY", "a-key")
        with app.app_context():
            system.add_model("fast", "gpt-4o-mini", default=True)
            db.session.remove()
    else:
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    page.goto("/settings/memory")
    warning = page.locator("#auto-capture").get_by_text("暂时不会自动收集任何记忆")
    expect(warning).to_have_count(0)
    page.get_by_role("switch", name="自动收集").click()
    expect(page.get_by_role("switch", name="自动收集")).to_have_attribute("aria-checked", "true")
    if key_set:
        expect(warning).to_have_count(0)
    else:
        _reads_chinese(warning)
        shot("auto-capture-without-a-model")
        page.reload()
        expect(warning).to_be_visible()
