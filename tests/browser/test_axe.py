"""axe-core (every rule, every impact) finds nothing on any state of our pages, on the desktop and
on the phone, so the pages stay at 0 violations."""

from __future__ import annotations

import pytest
from flask import Flask
from playwright.sync_api import Page

from tests.browser.axe import axe_violations
from tests.browser.conftest import ON_BOTH_SCREENS
from tests.browser.states import walk_every_state
from tests.conftest import Accounts
from tests.page_support import Store


@ON_BOTH_SCREENS
def test_axe_finds_nothing_on_any_state_of_any_page(page: Page, app: Flask, live_server: str,
                                                    users: Accounts, store: Store):
    found: dict[str, list[str]] = {}

    def look(state: str) -> None:
        found[state] = axe_violations(page)

    walk_every_state(page, app, live_server, users, store, look)
    assert len(found) == 28  # the walk reached every state
    assert {state: v for state, v in found.items() if v} == {}


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("device", ["desktop"], indirect=True)
def test_a_hovered_primary_button_keeps_its_contrast(page: Page, alice_id: int, scheme: str):
    """The pointer stays on 保存 after a click (a refused save leaves it there): the hovered
    button's text must stay readable on its darker background."""
    page.emulate_media(color_scheme=scheme)
    page.goto("/settings/memory")
    page.get_by_role("button", name="新增记忆", exact=True).click()
    dialog = page.get_by_role("dialog", name="新增记忆")
    dialog.get_by_label("内容").fill("回答请用中文")
    save = dialog.get_by_role("button", name="保存", exact=True)
    save.hover()
    assert save.is_enabled()
    assert save.evaluate("b => b.matches(':hover')")
    assert axe_violations(page) == []
