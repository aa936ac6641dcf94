"""Security headers (SPEC §8 Headers): nosniff and same-origin referrers everywhere, a script
policy without 'unsafe-*' on every HTML response, no-store for whatever a credential asked for."""

from __future__ import annotations

import pytest
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from tests.conftest import SERVICE_TOKEN, Accounts
from tests.page_support import PageSession


def _directives(response: TestResponse) -> dict[str, str]:
    policy = response.headers["Content-Security-Policy"]
    return dict((part.strip().split(" ", 1) + [""])[:2] for part in policy.split(";"))


@pytest.fixture
def alice_token(users: Accounts) -> str:
    users.user("alice")
    return users.token("alice")


@pytest.mark.parametrize("path", [
    "/healthz", "/api/v1/memory", "/api/v1/nope", "/api/openapi.json", "/metrics",
    "/static/app.css", "/favicon.ico", "/login", "/settings/memory", "/no/such/page",
])
def test_every_response_forbids_sniffing_and_keeps_referrers_on_the_site(client: FlaskClient,
                                                                         path: str):
    response = client.get(path)
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.headers["Referrer-Policy"] == "same-origin"
    response.close()


@pytest.mark.parametrize(("path", "status"), [
    ("/login", 200), ("/no/such/page", 404), ("/settings/memory", 200), ("/admin/settings", 403),
])
def test_every_html_response_carries_a_policy_that_runs_only_own_scripts_and_is_never_framed(
        alice_page: PageSession, path: str, status: int):
    response = alice_page.get(path)
    assert response.status_code == status
    assert response.mimetype == "text/html"
    directives = _directives(response)
    assert directives["default-src"] == "'self'"
    assert directives["script-src"] == "'self'"
    assert directives["frame-ancestors"] == "'none'"
    assert directives["object-src"] == "'none'"
    assert directives["base-uri"] == "'none'"
    assert directives["form-action"] == "'self'"
    assert "unsafe" not in response.headers["Content-Security-Policy"]
    assert response.headers["X-Frame-Options"] == "DENY"


def test_an_htmx_fragment_carries_the_policy_too(alice_page: PageSession):
    response = alice_page.htmx("GET", "/settings/memory")
    assert "<html" not in response.text
    assert _directives(response)["script-src"] == "'self'"


@pytest.mark.parametrize("path", ["/api/v1/memory", "/healthz", "/static/app.js"])
def test_a_response_that_is_not_html_carries_no_policy(client: FlaskClient, alice_token: str,
                                                        path: str):
    response = client.get(path, headers={"Authorization": f"Bearer {alice_token}"})
    assert "Content-Security-Policy" not in response.headers
    response.close()


def test_an_api_answer_to_a_personal_token_is_no_store(client: FlaskClient, alice_token: str):
    response = client.get("/api/v1/memory", headers={"Authorization": f"Bearer {alice_token}"})
    assert response.status_code == 200
    assert response.headers["Cache-Control"] == "no-store"


def test_the_context_read_for_the_platform_is_no_store(client: FlaskClient, users: Accounts):
    users.user("alice", user_id=42)
    response = client.get("/api/v1/internal/memory/context?userId=42",
                          headers={"Authorization": f"Bearer {SERVICE_TOKEN}"})
    assert response.status_code == 200
    assert response.headers["Cache-Control"] == "no-store"


def test_a_refused_credential_is_no_store_too(client: FlaskClient):
    response = client.get("/api/v1/memory", headers={"Authorization": "Bearer wrong"})
    assert response.status_code == 401
    assert response.headers["Cache-Control"] == "no-store"


@pytest.mark.parametrize(("path", "htmx"), [
    ("/settings/memory", False), ("/settings/memory", True), ("/api/v1/memory", False),
    ("/no/such/page", False),
])
def test_anything_asked_for_with_the_session_cookie_is_no_store(alice_page: PageSession,
                                                                path: str, htmx: bool):
    response = alice_page.htmx("GET", path) if htmx else alice_page.get(path)
    assert response.headers["Cache-Control"] == "no-store"


def test_the_login_form_starts_a_session_and_is_no_store(client: FlaskClient):
    response = client.get("/login")
    assert "Set-Cookie" in response.headers
    assert response.headers["Cache-Control"] == "no-store"


@pytest.mark.parametrize("path", ["/healthz", "/api/openapi.json", "/api/v1/memory"])
def test_an_answer_to_no_credential_is_not_marked_no_store(client: FlaskClient, path: str):
    response = client.get(path)
    assert "no-store" not in response.headers.get("Cache-Control", "")


def test_static_files_stay_cacheable_for_a_logged_in_browser(alice_page: PageSession):
    for path in ("/static/app.css", "/favicon.ico"):
        response = alice_page.get(path)
        assert response.status_code == 200
        assert "no-store" not in response.headers.get("Cache-Control", "")
        response.close()


HSTS = "Strict-Transport-Security"


@pytest.fixture
def production_app(make_app, app, monkeypatch):
    """The app as APP_ENV=production builds it, behind one trusted TLS proxy."""
    monkeypatch.setenv("APP_ENV", "production")
    monkeypatch.setenv("SECRET_KEY", "production-test-secret")
    return make_app(MEMORY_TRUSTED_PROXIES=1)


def test_production_html_over_https_carries_strict_transport_security(production_app):
    client = production_app.test_client()
    response = client.get("/login", headers={"X-Forwarded-Proto": "https"})
    assert response.mimetype == "text/html"
    assert response.headers[HSTS] == "max-age=31536000"
    assert HSTS not in client.get("/login").headers  # plain http: a browser would ignore it


def test_hsts_is_never_sent_outside_production(make_app, app):
    response = make_app(MEMORY_TRUSTED_PROXIES=1).test_client().get(
        "/login", headers={"X-Forwarded-Proto": "https"})
    assert HSTS not in response.headers
    assert HSTS not in app.test_client().get("/login", base_url="https://localhost").headers
