"""What the whole site shares (app/site.py): the icon, asset URLs versioned by content, and
Chinese pages for what the web server refuses outside /api/, where the envelope stays."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from flask.testing import FlaskClient

from tests.page_support import PageSession

STATIC = Path(__file__).resolve().parents[1] / "static"


def test_favicon_ico_answers_the_svg_icon(client: FlaskClient):
    response = client.get("/favicon.ico")
    assert response.status_code == 200
    assert response.mimetype == "image/svg+xml"
    assert response.data == (STATIC / "favicon.svg").read_bytes()
    response.close()


def test_every_page_links_the_icon_and_its_scripts_from_static(client: FlaskClient):
    html = client.get("/login").text
    digest = hashlib.sha256((STATIC / "app.js").read_bytes()).hexdigest()[:12]
    assert f'<script src="/static/app.js?v={digest}"></script>' in html
    assert '<link rel="icon" href="/static/favicon.svg?v=' in html
    assert "<script>" not in html and " on" not in html.split("<body", 1)[1].split(">", 1)[0]


@pytest.mark.parametrize(("path", "status", "heading"), [
    ("/admin/nope", 404, "页面不存在"),
    ("/settings/memory/items", 405, "不支持这样打开这个地址"),
])
def test_a_wrong_address_outside_the_api_gets_a_chinese_page(client: FlaskClient, path: str,
                                                             status: int, heading: str):
    response = client.get(path)
    assert response.status_code == status
    assert response.mimetype == "text/html"
    assert f"<h1>{heading}</h1>" in response.text
    assert "Not Found" not in response.text and "Method Not Allowed" not in response.text


def test_a_wrong_address_asked_by_htmx_answers_in_the_toast(alice_page: PageSession):
    response = alice_page.htmx("GET", "/settings/memory/nope")
    assert response.status_code == 404
    assert response.headers["HX-Retarget"] == "#toast"
    assert "这个地址没有页面" in response.text


@pytest.mark.parametrize("path", ["/api/v1/nope", "/api/v1/memory/1/nope"])
def test_a_wrong_address_under_the_api_keeps_the_envelope(client: FlaskClient, path: str):
    response = client.get(path)
    assert response.status_code == 404
    assert response.get_json()["code"] == 2001


def test_a_crash_on_a_page_is_a_chinese_page_and_under_the_api_the_envelope(make_app):
    def crash():
        raise RuntimeError("boom")

    app = make_app()  # a new app: routes are added before its first request
    app.add_url_rule("/crash", "crash", crash)
    app.add_url_rule("/api/v1/crash", "api_crash", crash)
    client = app.test_client()
    page = client.get("/crash")
    assert page.status_code == 500
    assert "<h1>出错了</h1>" in page.text
    assert "Internal Server Error" not in page.text
    api = client.get("/api/v1/crash")
    assert api.status_code == 500
    assert api.get_json()["code"] == 5001
