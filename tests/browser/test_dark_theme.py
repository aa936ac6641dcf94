"""With the system in dark mode every page is dark, under the same contrast rules as the light
theme: the suite's own check (4.5:1 text, 3:1 control edges) and axe-core, in every state."""

from __future__ import annotations

from flask import Flask
from playwright.sync_api import Page

from tests.browser.axe import axe_violations
from tests.browser.checks import LOW_CONTRAST
from tests.browser.conftest import ON_BOTH_SCREENS
from tests.browser.screens import keep
from tests.browser.states import walk_every_state
from tests.conftest import Accounts
from tests.page_support import Store

# The page's own background: its relative luminance (0 black, 1 white).
BACKGROUND_LUMINANCE = """() => {
    const [r, g, b] = getComputedStyle(document.body).backgroundColor.match(/[\\d.]+/g)
        .map(Number).map(v => (v /= 255) <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4);
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}"""
# The states kept as pictures in docs/screenshots/ (dark-<state>-<device>.png).
PICTURED = {"memory", "add-dialog-project", "history", "audit-memories", "login-expired"}


@ON_BOTH_SCREENS
def test_the_pages_follow_a_dark_system_theme_with_the_same_contrast(
        page: Page, app: Flask, live_server: str, users: Accounts, store: Store, device: str):
    page.emulate_media(color_scheme="dark")
    found: dict[str, list[str]] = {}

    def look(state: str) -> None:
        assert page.evaluate(BACKGROUND_LUMINANCE) < 0.05, state
        found[state] = page.evaluate(LOW_CONTRAST) + axe_violations(page)
        if state in PICTURED:
            keep(page, f"dark-{state}", device)

    walk_every_state(page, app, live_server, users, store, look)
    assert len(found) == 28  # the walk reached every state
    assert {state: v for state, v in found.items() if v} == {}
