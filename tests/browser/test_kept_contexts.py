"""The browser harness: one server per test process taking each test's app in turn, and browser
contexts kept from test to test, which must hand every test a page as clean as a new context's."""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from wsgiref.types import StartResponse, WSGIEnvironment

import pytest
from flask import Flask

from tests.browser.conftest import NATIVE_CLOCK, KeptContexts
from tests.serving import AppsInTurn, in_thread

# What a page can leave behind in its context, each in a way the app's own pages use.
LEAVE_EVERYTHING = """() => {
  document.cookie = "left=1; path=/";
  localStorage.setItem("left", "1");
  sessionStorage.setItem("left", "1");
  return new Promise(done => { indexedDB.open("left").onsuccess = done; });
}"""
# What the next page finds of it: storage, and static files answered from the HTTP cache (the
# app's are `no-cache`: revalidated, a 304 whose transfer is smaller than the body it reuses).
WHAT_IS_LEFT = """async () => ({
  cookie: document.cookie,
  local: localStorage.getItem("left"),
  session: sessionStorage.getItem("left"),
  databases: (await indexedDB.databases()).map(db => db.name),
  cached: performance.getEntriesByType("resource")
    .filter(entry => entry.transferSize <= entry.encodedBodySize)
    .map(entry => entry.name),
})"""


def test_a_page_finds_nothing_the_test_before_left_in_its_context(
        contexts: KeptContexts, live_server: str):
    first = contexts.new_page("default")
    first.goto("/login")
    first.evaluate(LEAVE_EVERYTHING)
    first.context.add_cookies([{"name": "added", "value": "1", "url": live_server}])
    another = first.context.new_page()
    another.goto("/login")
    first.close()
    contexts.done("default")

    assert another.is_closed()
    second = contexts.new_page("default")
    assert second.context is first.context  # what the test is about: the kept context
    assert second.context.cookies() == []
    second.goto("/login")
    assert second.evaluate(WHAT_IS_LEFT) == {"cookie": "", "local": None, "session": None,
                                             "databases": [], "cached": []}
    second.close()
    contexts.done("default")


def test_a_fake_clock_ends_its_context(contexts: KeptContexts, live_server: str):
    first = contexts.new_page("default")
    first.clock.install()
    first.goto("/login")
    first.close()
    contexts.done("default")

    second = contexts.new_page("default")
    assert second.context is not first.context
    second.goto("/login")
    assert second.evaluate(NATIVE_CLOCK)
    second.close()
    contexts.done("default")


def test_each_screen_keeps_a_context_of_its_own(contexts: KeptContexts, live_server: str):
    desktop, phone = contexts.new_page("desktop"), contexts.new_page("phone")
    assert desktop.context is not phone.context
    assert desktop.viewport_size == {"width": 1280, "height": 800}
    assert phone.viewport_size == {"width": 390, "height": 844}
    for device, page in (("desktop", desktop), ("phone", phone)):
        page.close()
        contexts.done(device)


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def test_between_tests_the_server_answers_503_and_during_one_serves_its_app(app: Flask):
    apps = AppsInTurn()
    with in_thread(apps) as url:
        assert _get(url + "/healthz")[0] == 503
        with apps.serving(app):
            assert _get(url + "/healthz")[0] == 200
        assert _get(url + "/healthz")[0] == 503


@pytest.mark.usefixtures("app")
def test_a_test_ends_only_after_its_requests_have_been_answered():
    started, release = threading.Event(), threading.Event()
    events: list[str] = []

    def slow(environ: WSGIEnvironment, start_response: StartResponse) -> list[bytes]:
        started.set()
        release.wait(10)
        start_response("200 OK", [("Content-Type", "text/plain")])
        events.append("answered")
        return [b"late"]

    apps = AppsInTurn()
    with in_thread(apps) as url:
        client = threading.Thread(target=_get, args=(url + "/slow",))
        with apps.serving(slow):
            client.start()
            assert started.wait(10)
            threading.Timer(0.2, release.set).start()
        events.append("handed over")
        client.join(10)
    assert events == ["answered", "handed over"]
