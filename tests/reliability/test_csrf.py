"""CSRF: a cookie-authenticated unsafe request without this session's token changes nothing.

Every unsafe route of the app (page or JSON API) is tried by a logged-in admin who owns a memory,
with the session cookie and a well-formed body: no token, another session's token, and a wrong
one are all 403 with every table unchanged; the same request with the right token succeeds, so
the token was the only thing missing.
"""

from __future__ import annotations

from tests.conftest import Memories, snapshot
from tests.reliability.conftest import People
from tests.reliability.routes import REQUESTS, UNSAFE_METHODS, Route, app_routes

# Unsafe routes that are not protected by the session's CSRF token, and why.
EXEMPT: dict[Route, str] = {
    ("/api/v1/webhooks/task-completed", "POST"): "authenticated by the body's HMAC, no cookie",
    ("/login", "POST"): "no session yet: its own form token, refused as 400 (tested below)",
}
# Checked by a test of its own: its success ends the session every other check needs.
CHECKED_APART: dict[Route, str] = {("/logout", "POST"): "tested below"}
SUCCESS = {"POST": (200, 201), "PUT": (200,), "PATCH": (200,), "DELETE": (200,)}


def _unsafe_routes() -> list[Route]:
    return sorted(route for route in REQUESTS
                  if route[1] in UNSAFE_METHODS and route not in EXEMPT | CHECKED_APART)


def test_every_unsafe_route_is_checked_or_exempt_for_a_reason(app):
    unsafe = {route for route in app_routes(app) if route[1] in UNSAFE_METHODS}
    assert unsafe == set(_unsafe_routes()) | set(EXEMPT) | set(CHECKED_APART)


def _refusals(app, people: People, route: Route, item: int) -> list[str]:
    """What is wrong with one route's CSRF protection (nothing: an empty list)."""
    admin = people.admin
    request = REQUESTS[route]
    url = request.url(item=item, owner=admin.user_id)
    before = snapshot(app)
    forged = {"no": {}, "another session's": {"X-CSRF-Token": people.other.csrf},
              "a made-up": {"X-CSRF-Token": "x" * 43}}
    problems = []
    for what, headers in forged.items():
        # The cookie alone: no personal token, which would need no CSRF token at all.
        response = admin.client.open(url, method=route[1], headers=headers, **request.kwargs())
        where = f"{route[1]} {route[0]} with {what} token"
        if response.status_code != 403:
            problems.append(f"{where}: {response.status_code} {response.text[:200]}")
        elif url.startswith("/api/"):
            body = response.get_json(silent=True) or {}
            if body.get("code") != 1002 or "data" in body:
                problems.append(f"{where}: not the 1002 envelope: {body}")
        elif "页面已过期" not in response.text:
            problems.append(f"{where}: not the expired-page answer: {response.text[:200]}")
        if snapshot(app) != before:
            problems.append(f"{where}: changed something")
    response = admin.client.open(url, method=route[1], headers={"X-CSRF-Token": admin.csrf},
                                 **request.kwargs())
    if response.status_code not in SUCCESS[route[1]]:
        problems.append(f"{route[1]} {route[0]} with the right token: "
                        f"{response.status_code} {response.text[:200]}")
    return problems


def test_a_session_request_without_its_csrf_token_is_403_and_changes_nothing(
        app, people: People, memories: Memories):
    """Every unsafe route; the right token then succeeds, so it was the only thing missing."""
    problems = []
    for route in _unsafe_routes():
        item = memories.add(people.admin.user_id, f"root 的记忆 · {route[1]} {route[0]}")
        problems += _refusals(app, people, route, item)
    assert not problems, "\n".join(problems)


def test_a_form_token_in_the_body_is_accepted_like_the_header(app, people: People):
    """Plain HTML forms send the token as `csrf_token`, not as a header."""
    response = people.owner.client.post("/settings/memory/items", data={
        "scope": "USER", "content": "表单里带令牌", "csrf_token": people.owner.csrf})
    assert response.status_code == 201
    response = people.owner.client.post("/settings/memory/items", data={
        "scope": "USER", "content": "表单里的令牌是别人的", "csrf_token": people.other.csrf})
    assert response.status_code == 403


def test_a_logout_without_its_csrf_token_is_403_and_ends_nothing(app, people: People):
    """Another site cannot log the user out; with the token the login ends."""
    owner = people.owner
    for headers in ({}, {"X-CSRF-Token": people.other.csrf}, {"X-CSRF-Token": "x" * 43}):
        response = owner.client.post("/logout", headers=headers)
        assert response.status_code == 403 and "页面已过期" in response.text
        assert owner.client.get("/settings/memory").status_code == 200
    response = owner.client.post("/logout", data={"csrf_token": owner.csrf})
    assert response.status_code == 302
    assert owner.client.get("/settings/memory").status_code == 302


def test_login_without_the_form_token_is_refused_and_logs_nobody_in(app, people: People):
    client = app.test_client()
    response = client.post("/login", data={"username": "alice", "password": "x"})
    assert response.status_code == 400
    assert client.get("/settings/memory").status_code == 302


def test_a_personal_token_needs_no_csrf_token(app, people: People):
    """Bearer calls carry no ambient credential: CSRF cannot ride on them."""
    response = people.owner.client.post("/api/v1/memory", headers=people.owner.api_headers,
                                        json={"scope": "USER", "content": "令牌调用"})
    assert response.status_code == 201
