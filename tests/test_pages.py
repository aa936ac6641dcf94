"""What every HTML page shares (app/pages.py): a login first, htmx fragments that vary on
HX-Request, the CSRF token on every unsafe request, the navigation."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

from tests.page_support import PageSession, Store, csrf_from

PAGES = ["/settings/memory", "/admin/memory", "/admin/settings"]

# (method, path, form): every htmx endpoint of the pages; {item} is a memory of the caller.
FRAGMENT_ENDPOINTS = [
    ("GET", "/settings/memory", None),
    ("GET", "/settings/memory?scope=USER&status=DISMISSED", None),
    ("GET", "/settings/memory/projects?scope=PROJECT", None),
    ("GET", "/settings/memory/items/{item}", None),
    ("GET", "/settings/memory/items/{item}/edit", None),
    ("GET", "/settings/memory/items/{item}/delete", None),
    ("POST", "/settings/memory/items", {"scope": "USER", "content": "另一条记忆"}),
    ("PATCH", "/settings/memory/items/{item}", {"content": "改过的内容"}),
    ("PATCH", "/settings/memory/items/{item}/status", {"new_status": "DISMISSED"}),
    ("DELETE", "/settings/memory/items/{item}", None),
    ("PATCH", "/settings/memory/auto-capture", {"enabled": "true"}),
    ("GET", "/admin/memory?q=root&userId={user}", None),
    ("PUT", "/admin/settings/memory.extractionModelId", {"value": ""}),
]
UNSAFE_ENDPOINTS = [e for e in FRAGMENT_ENDPOINTS if e[0] != "GET"]


@pytest.fixture
def root_page(users, pages: PageSession) -> PageSession:
    """An admin, who may use every page."""
    pages.user_id = users.user("root", admin=True)
    pages.login("root")
    return pages


@pytest.fixture
def item(root_page: PageSession, store: Store) -> int:
    """A memory of the admin's own."""
    return store.add(root_page.user_id, "原来的内容")


def _path(template: str, page: PageSession, item: int) -> str:
    return template.format(item=item, user=page.user_id)


@pytest.mark.parametrize(("method", "path", "form"), FRAGMENT_ENDPOINTS)
def test_htmx_endpoint_answers_only_its_fragment(root_page, item, method, path, form):
    response = root_page.htmx(method, _path(path, root_page, item), form)
    assert 200 <= response.status_code < 300, response.text
    assert "<html" not in response.text
    assert "<body" not in response.text


@pytest.mark.parametrize(("method", "path", "form"), FRAGMENT_ENDPOINTS)
def test_htmx_endpoint_varies_on_hx_request(root_page, item, method, path, form):
    response = root_page.htmx(method, _path(path, root_page, item), form)
    assert "HX-Request" in response.vary


@pytest.mark.parametrize(("method", "path", "form"), UNSAFE_ENDPOINTS)
def test_unsafe_endpoint_refuses_a_missing_csrf_token(root_page, item, store, method, path,
                                                       form):
    before = store.of(root_page.user_id)
    response = root_page.htmx(method, _path(path, root_page, item), form, csrf=False)
    assert response.status_code == 403
    assert "页面已过期" in response.text
    assert store.of(root_page.user_id) == before


@pytest.mark.parametrize(("method", "path", "form"), UNSAFE_ENDPOINTS)
def test_unsafe_endpoint_refuses_a_wrong_csrf_token(root_page, item, store, method, path, form):
    before = store.of(root_page.user_id)
    response = root_page.htmx(method, _path(path, root_page, item), form, csrf=False,
                              headers={"X-CSRF-Token": "not-the-token"})
    assert response.status_code == 403
    assert store.of(root_page.user_id) == before


def test_auto_capture_refuses_a_missing_csrf_token_and_stays_off(root_page):
    root_page.htmx("PATCH", "/settings/memory/auto-capture", {"enabled": "true"}, csrf=False)
    page = root_page.get("/settings/memory")
    assert 'aria-checked="false"' in page.text


def test_csrf_refusal_goes_to_the_toast_in_view(root_page, item):
    response = root_page.htmx("DELETE", f"/settings/memory/items/{item}", csrf=False)
    assert response.headers["HX-Retarget"] == "#toast"
    assert response.headers["HX-Reswap"] == "innerHTML"


@pytest.mark.parametrize("path", ["/settings/memory", "/admin/memory", "/admin/settings"])
def test_plain_navigation_gets_the_whole_page(root_page, path):
    response = root_page.get(path)
    assert response.status_code == 200
    assert response.text.lstrip().startswith("<!doctype html>")
    assert "HX-Request" in response.vary


def test_history_restore_gets_the_whole_page_not_the_fragment(root_page):
    response = root_page.get("/settings/memory?status=DISMISSED", **{
        "HX-Request": "true", "HX-History-Restore-Request": "true"})
    assert "<html" in response.text


def test_list_fragment_has_no_html_shell(root_page):
    response = root_page.htmx("GET", "/settings/memory")
    assert response.text.lstrip().startswith('<section id="memory-list"')


def test_page_carries_the_csrf_token_for_htmx_on_body(root_page):
    """The page's own token (Flask-WTF signs each with its second, so two renders may differ),
    on <body> for every htmx request, and good for a write."""
    html = root_page.get("/settings/memory").text
    token = csrf_from(html)
    assert f'<body hx-headers=\'{{"X-CSRF-Token": "{token}"}}\'>' in html
    root_page.csrf = token
    assert root_page.htmx("PATCH", "/settings/memory/auto-capture",
                          {"enabled": "true"}).status_code == 200


def test_htmx_is_vendored_with_its_version_in_the_file_name(root_page, client):
    html = root_page.get("/settings/memory").text
    assert '<script src="/static/htmx-2.0.11.min.js"></script>' in html
    response = client.get("/static/htmx-2.0.11.min.js")
    assert response.status_code == 200
    assert b"htmx" in response.data
    response.close()


@pytest.mark.parametrize("path", [*PAGES, "/settings/memory?scope=USER&status=DISMISSED"])
def test_page_redirects_to_login_with_next(client, path):
    response = client.get(path)
    assert response.status_code == 302
    location = urlsplit(response.headers["Location"])
    assert location.path == "/login"
    assert parse_qs(location.query)["next"] == [path]


@pytest.mark.parametrize(("method", "path"), [
    ("GET", "/settings/memory/items/1/edit"),
    ("PATCH", "/settings/memory/auto-capture"),
    ("DELETE", "/settings/memory/items/1"),
    ("PUT", "/admin/settings/memory.extractionModelId"),
])
def test_htmx_request_without_login_navigates_to_login(client, method, path):
    response = client.open(path, method=method, headers={
        "HX-Request": "true", "HX-Current-URL": "http://localhost/settings/memory?scope=USER"})
    assert response.status_code == 401
    assert response.headers["HX-Redirect"] == (
        "/login?next=/settings/memory?scope%3DUSER&expired=1")
    assert "HX-Request" in response.vary


def test_navigation_shows_only_pages_the_user_may_open(users, pages):
    users.user("alice")
    pages.login("alice")
    html = pages.get("/settings/memory").text
    assert 'href="/settings/memory"' in html
    assert 'href="/admin/memory"' not in html
    assert 'href="/admin/settings"' not in html
    users.user("root", admin=True)
    pages.login("root")
    html = pages.get("/settings/memory").text
    assert 'href="/admin/memory"' in html and 'href="/admin/settings"' in html
