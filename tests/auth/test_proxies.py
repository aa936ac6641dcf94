"""Behind proxies (SPEC §9 Accounts): with MEMORY_TRUSTED_PROXIES=N the client's address, scheme
and host are the ones N proxies back wrote (werkzeug's ProxyFix); with 0 (the default) the
forwarding headers are the client's own words and change nothing."""

from __future__ import annotations

import pytest

from app.auth import throttle
from tests.conftest import PASSWORD
from tests.page_support import csrf_from


def _login(client, *, forwarded_for: str, password: str = "wrong", username: str = "alice",
           **headers: str):
    headers = {"X-Forwarded-For": forwarded_for, **headers}
    token = csrf_from(client.get("/login", headers=headers).text)
    return client.post("/login", headers=headers, data={
        "username": username, "password": password, "csrf_token": token})


@pytest.fixture
def behind_one_proxy(make_app, app, clock):
    """The app as deployed behind one load balancer; `clock` makes logins cheap."""
    return make_app(MEMORY_TRUSTED_PROXIES=1)


def test_behind_a_trusted_proxy_failures_count_per_forwarded_client_address(
        behind_one_proxy, users):
    users.user("zoe")
    client = behind_one_proxy.test_client()
    # Twenty failures over many names from one client lock that client out…
    for i in range(throttle.ADDRESS_FAILURES.amount):
        assert _login(client, forwarded_for="203.0.113.9",
                      username=f"guess{i % 4}").status_code == 401
    assert _login(client, forwarded_for="203.0.113.9", username="zoe",
                  password=PASSWORD).status_code == 429
    # …not everyone behind the same balancer.
    assert _login(client, forwarded_for="198.51.100.7", username="zoe",
                  password=PASSWORD).status_code == 302


def test_without_trusted_proxies_x_forwarded_for_is_ignored(client, users, clock):
    users.user("zoe")
    for i in range(throttle.ADDRESS_FAILURES.amount):
        _login(client, forwarded_for=f"203.0.113.{i}", username=f"guess{i % 4}")
    assert _login(client, forwarded_for="198.51.100.7", username="zoe",
                  password=PASSWORD).status_code == 429


def test_behind_a_trusted_tls_proxy_the_request_is_https_with_the_forwarded_host(
        behind_one_proxy):
    seen = {}

    @behind_one_proxy.get("/_probe")
    def probe():
        from flask import request

        seen.update(scheme=request.scheme, host=request.host, address=request.remote_addr)
        return ""

    behind_one_proxy.test_client().get("/_probe", headers={
        "X-Forwarded-For": "203.0.113.9", "X-Forwarded-Proto": "https",
        "X-Forwarded-Host": "memory.example.com"})
    assert seen == {"scheme": "https", "host": "memory.example.com", "address": "203.0.113.9"}


def test_behind_a_trusted_tls_proxy_a_login_without_a_same_site_referer_is_refused(
        behind_one_proxy, users):
    """The strict Referer check of CSRF runs once Flask sees https (Flask-WTF's SSL strict)."""
    users.user("alice")
    client = behind_one_proxy.test_client()
    forwarded = {"X-Forwarded-Proto": "https", "X-Forwarded-Host": "memory.example.com"}
    assert _login(client, forwarded_for="203.0.113.9", password=PASSWORD,
                  **forwarded).status_code == 400
    response = _login(client, forwarded_for="203.0.113.9", password=PASSWORD,
                      Referer="https://memory.example.com/login", **forwarded)
    assert response.status_code == 302
