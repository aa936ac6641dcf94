"""Page tests: log in through the login form, then talk to the pages the way htmx does."""

from __future__ import annotations

import re

import pytest
from flask import Flask
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from tests.conftest import PASSWORD, Accounts
from tests.pages.support import Memories, speed_up

_CSRF_META = re.compile(r'<meta name="csrf-token" content="([^"]+)">')


def csrf_from(html: str) -> str:
    match = _CSRF_META.search(html)
    assert match, "page carries no csrf-token meta"
    return match.group(1)


class PageSession:
    """One logged-in browser: the session cookie and the CSRF token the page gave it."""

    def __init__(self, client: FlaskClient) -> None:
        self.client = client
        self.csrf = ""
        self.user_id = 0

    def login(self, username: str, password: str = PASSWORD, next_url: str | None = None
              ) -> TestResponse:
        form = {"username": username, "password": password,
                "csrf_token": csrf_from(self.client.get("/login").text)}
        if next_url:
            form["next"] = next_url
        response = self.client.post("/login", data=form)
        assert response.status_code == 302, response.text
        # Login starts a new session, so the token comes from a page rendered after it.
        self.csrf = csrf_from(self.client.get("/login").text)
        return response

    def get(self, path: str, **headers: str) -> TestResponse:
        """A plain browser navigation."""
        return self.client.get(path, headers=headers)

    def htmx(self, method: str, path: str, data: dict[str, str] | None = None, *,
             csrf: bool = True, headers: dict[str, str] | None = None) -> TestResponse:
        """What htmx sends: HX-Request, and the token from <body hx-headers> unless told not."""
        sent = {"HX-Request": "true", **(headers or {})}
        if csrf:
            sent["X-CSRF-Token"] = self.csrf
        return self.client.open(path, method=method, data=data, headers=sent)


@pytest.fixture(autouse=True)
def fast_pages(app: Flask, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test logs in and renders pages: see `speed_up`."""
    speed_up(app, monkeypatch)


@pytest.fixture
def pages(client: FlaskClient) -> PageSession:
    return PageSession(client)


@pytest.fixture
def alice_page(users: Accounts, pages: PageSession) -> PageSession:
    """alice, an ordinary user, logged in."""
    pages.user_id = users.user("alice")
    pages.login("alice")
    return pages


@pytest.fixture
def memories(app: Flask) -> Memories:
    return Memories(app)
