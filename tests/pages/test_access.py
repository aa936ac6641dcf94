"""Who may open which page: login first, then memory:read for the audit, admin for settings."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

PAGES = ["/settings/memory", "/admin/memory", "/admin/settings"]


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
    assert response.headers["HX-Redirect"] == "/login?next=/settings/memory?scope%3DUSER"
    assert "HX-Request" in response.vary


def test_login_returns_to_the_page_asked_for(users, pages):
    users.user("auditor", grants=("memory:read",))
    response = pages.login("auditor", next_url="/admin/memory?q=a")
    assert response.headers["Location"] == "/admin/memory?q=a"


def test_login_lands_on_my_memory_by_default(users, pages):
    users.user("alice")
    assert pages.login("alice").headers["Location"] == "/settings/memory"


def test_audit_page_is_forbidden_without_memory_read(alice_page):
    response = alice_page.get("/admin/memory")
    assert response.status_code == 403
    assert "记忆审计需要 memory:read 权限" in response.text
    assert "本页面用于审计用户记忆内容" not in response.text


def test_audit_fragment_is_forbidden_without_memory_read(alice_page):
    response = alice_page.htmx("GET", "/admin/memory?userId=1")
    assert response.status_code == 403
    assert response.headers["HX-Retarget"] == "#flash"


@pytest.mark.parametrize("grants", [("memory:read",), ()])
def test_settings_page_is_for_admins_only(users, pages, grants):
    users.user("carol", grants=grants)
    pages.login("carol")
    assert pages.get("/admin/settings").status_code == 403
    response = pages.htmx("PUT", "/admin/settings/memory.extractionModelId", {"value": ""})
    assert response.status_code == 403


@pytest.mark.parametrize(("grants", "admin", "status"), [
    (("memory:read",), False, 200),
    ((), True, 200),
])
def test_audit_page_opens_for_memory_read_or_admin(users, pages, grants, admin, status):
    users.user("dave", grants=grants, admin=admin)
    pages.login("dave")
    assert pages.get("/admin/memory").status_code == status


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


def test_admin_pages_offer_no_route_that_writes_a_memory(app):
    methods = {rule.rule: rule.methods - {"HEAD", "OPTIONS"} for rule in app.url_map.iter_rules()
               if rule.endpoint.startswith("admin_pages.")}
    assert methods == {"/admin/memory": {"GET"}, "/admin/settings": {"GET"},
                       "/admin/settings/<path:key>": {"PUT"}}
