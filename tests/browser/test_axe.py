"""axe-core (every rule, every impact) finds nothing on any state of our pages, on the desktop and
on the phone, so the pages stay at 0 violations."""

from __future__ import annotations

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
