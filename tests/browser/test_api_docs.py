"""The interactive API page (`/api/docs`): Swagger UI on the service's own OpenAPI document,
every asset served by the service itself (no CDN), under the pages' CSP."""

from __future__ import annotations

import re

import pytest

from tests.serving import in_thread, modules_after_import_wsgi


def test_api_page_loads_nothing_from_another_site(client):
    response = client.get("/api/docs")
    assert response.status_code == 200 and response.mimetype == "text/html"
    page = response.get_data(as_text=True)
    assert "//" not in "".join(re.findall(r'(?:src|href)="([^"]+)"', page))
    assert 'data-spec-url="/api/openapi.json"' in page
    assert "script-src 'self'" in response.headers["Content-Security-Policy"]


def test_every_asset_of_the_api_page_is_served_here(client):
    page = client.get("/api/docs").get_data(as_text=True)
    assets = re.findall(r'(?:src|href)="([^"]+)"', page)
    assert len(assets) == 5
    for asset in assets:
        response = client.get(asset)
        response.close()  # a static file answers with an open file
        assert response.status_code == 200, asset


def test_only_the_bundled_ui_files_are_served(client):
    assert client.get("/api/docs/assets/url.json").status_code == 404
    assert client.get("/api/docs/assets/__init__.py").status_code == 404


@pytest.mark.usefixtures("app")
def test_the_api_page_shows_every_operation_in_a_browser(app, browser):
    page = browser.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(str(error)))
    with in_thread(app) as url:
        page.goto(url + "/api/docs")
        page.wait_for_selector(".opblock", timeout=30_000)
        assert page.locator(".opblock").count() >= 15
        assert page.locator(".info .title").first.inner_text().startswith("Memory service")
    page.close()
    assert problems == []


def test_a_process_does_not_build_the_ui_templates_it_never_serves():
    """spectree would render offapi's three UIs (9 MB of JavaScript, 37 MB kept) into page
    templates at import in every web process, worker and command; the page serves offapi's
    files itself."""
    assert "offapi" not in modules_after_import_wsgi()
