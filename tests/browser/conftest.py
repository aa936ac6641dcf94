"""Browser tests: the app served on 127.0.0.1 from a thread, driven by Debian's chromium.

One browser and one server per test process; each test gets a new page in a context kept per
screen, emptied of cookies, storage and cache first (see `KeptContexts`). Never
`playwright install`: the system's /usr/bin/chromium is the browser
(`apt-get install -y chromium`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from flask import Flask
from playwright.sync_api import Browser, BrowserContext, CDPSession, Page, expect, sync_playwright

from app.auth.models import LoginSession
from app.extensions import db
from tests.browser.screens import ARTIFACTS
from tests.conftest import PASSWORD, Accounts
from tests.page_support import PageSession, speed_up
from tests.serving import AppsInTurn, in_thread

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run", "--disable-sync"]
# Generous: the suite runs in 4 processes on 2 cores next to browsers, servers and clusters; a
# wait that passes returns as soon as its condition holds, so only a failure waits this long.
TIMEOUT_MS = 10_000
expect.set_options(timeout=TIMEOUT_MS)


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture(autouse=True)
def fast_pages(app: Flask, monkeypatch: pytest.MonkeyPatch) -> None:
    speed_up(app, monkeypatch)


@pytest.fixture(scope="session")
def origin() -> Iterator[tuple[str, AppsInTurn]]:
    """One server for the tests of this process: the pages of all of them share an origin."""
    apps = AppsInTurn()
    with in_thread(apps) as url:
        yield url, apps


@pytest.fixture
def live_server(app: Flask, origin: tuple[str, AppsInTurn]) -> Iterator[str]:
    """The URL serving the test app while this test runs."""
    url, apps = origin
    with apps.serving(app):
        yield url


# The screens a person uses: a desktop window, and a phone (touch, no hover).
DEVICES: dict[str, dict[str, Any]] = {
    "default": {"viewport": {"width": 1200, "height": 900}},
    "desktop": {"viewport": {"width": 1280, "height": 800}},
    "phone": {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True},
}
# `@ON_BOTH_SCREENS` runs a test once on the desktop and once on the phone.
ON_BOTH_SCREENS = pytest.mark.parametrize("device", ["desktop", "phone"], indirect=True)
# What Chromium logs when the Content-Security-Policy blocks something.
CSP_VIOLATION = "Content Security Policy"


@pytest.fixture
def device(request: pytest.FixtureRequest) -> str:
    """The screen of this test's browser: `default` unless the test asks for others."""
    return getattr(request, "param", "default")


# True in a page whose timers are the browser's own: false once `page.clock` has replaced them.
NATIVE_CLOCK = ("[Date, Date.now, setTimeout, setInterval, performance.now].every("
                 "f => /\\[native code\\]/.test(Function.prototype.toString.call(f)))")


class KeptContexts:
    """A browser context per screen, kept from test to test of one process.

    A page in a kept context costs Chromium half the CPU of a new context (0.21 against 0.46 s
    for a page opened, loaded and closed); over the browser tests on 2 processes, Chromium's CPU
    went from 122 to 62 s and the wall time from 83 to 51 s. A kept context holds an about:blank
    page: with no page left, Chromium tears down what the next page would reuse.

    Before each test the context is emptied of what a page can leave in it: cookies, storage of
    every kind, the HTTP cache (the app's static files are revalidated, so a kept cache would turn
    their 200s into 304s) and permissions; sessionStorage, where htmx keeps its history, belongs
    to the page. What cannot be emptied ends the context instead: a fake clock, which
    `page.clock` installs in every page of the context for good.
    """

    def __init__(self, browser: Browser, url: str) -> None:
        self._browser = browser
        self._url = url
        self._kept: dict[str, tuple[BrowserContext, Page, CDPSession]] = {}

    def new_page(self, device: str) -> Page:
        if device in self._kept:
            context, _, cdp = self._kept[device]
            context.clear_cookies()
            context.clear_permissions()
            cdp.send("Storage.clearDataForOrigin", {"origin": self._url, "storageTypes": "all"})
            cdp.send("Network.clearBrowserCache")
        else:
            context = self._browser.new_context(base_url=self._url, locale="zh-CN",
                                                **DEVICES[device])
            context.set_default_timeout(TIMEOUT_MS)
            blank = context.new_page()
            self._kept[device] = (context, blank, context.new_cdp_session(blank))
        return context.new_page()

    def done(self, device: str) -> None:
        """After a test: pages it opened are closed; a context it changed for good is not kept."""
        context, blank, _ = self._kept[device]
        for page in context.pages:
            if page is not blank:
                page.close()
        if not blank.evaluate(NATIVE_CLOCK):
            del self._kept[device]
            context.close()

    def close(self) -> None:
        for context, _, _ in self._kept.values():
            context.close()


@pytest.fixture(scope="session")
def contexts(browser: Browser, origin: tuple[str, AppsInTurn]) -> Iterator[KeptContexts]:
    kept = KeptContexts(browser, origin[0])
    yield kept
    kept.close()


@pytest.fixture
def page(contexts: KeptContexts, live_server: str, device: str) -> Iterator[Page]:
    """A new page, in a context with no cookies, storage or cache. Anything the page's
    Content-Security-Policy blocks fails the test: every page must work under it."""
    page = contexts.new_page(device)
    blocked: list[str] = []
    page.on("console", lambda message: blocked.append(message.text)
            if CSP_VIOLATION in message.text else None)
    yield page
    page.close()
    contexts.done(device)
    assert blocked == [], f"blocked by the Content-Security-Policy: {blocked}"


@pytest.fixture
def artifacts() -> Path:
    """Where screenshots go (gitignored), kept after the run for a person to look at."""
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


@pytest.fixture
def shot(page: Page, artifacts: Path, device: str) -> Callable[[str], None]:
    """`shot(name)` saves what the screen shows as test-artifacts/<name>-<device>.png."""
    def take(name: str) -> None:
        page.screenshot(path=artifacts / f"{name}-{device}.png")
    return take


def log_in(page: Page, username: str) -> None:
    """Through the login form, as a person would."""
    page.goto("/login")
    page.get_by_label("用户名").fill(username)
    page.get_by_label("密码").fill(PASSWORD)
    page.get_by_role("button", name="登录", exact=True).click()
    page.wait_for_url("**/settings/memory")


def hand_session_to(page: Page, app: Flask, live_server: str, username: str) -> None:
    """Log in through the login form with the test client and give the browser that session.

    The same session a person gets, without two page loads in every test; the form itself is
    driven in the browser by the tests about logging in.
    """
    client = app.test_client()
    PageSession(client).login(username)
    cookie = client.get_cookie("session")
    assert cookie is not None
    page.context.add_cookies([{"name": cookie.key, "value": cookie.value, "url": live_server}])


def expire_logins(app: Flask) -> None:
    """Every login ends server-side, as when it expires: the browser's cookie stays."""
    with app.app_context():
        db.session.execute(sa.delete(LoginSession))
        db.session.commit()


@pytest.fixture
def alice_id(app: Flask, users: Accounts, page: Page, live_server: str) -> int:
    """alice, an ordinary user, logged in in this test's browser (no page open yet)."""
    user_id = users.user("alice")
    hand_session_to(page, app, live_server, "alice")
    return user_id
