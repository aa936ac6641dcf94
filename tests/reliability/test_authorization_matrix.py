"""Who may call what: every route of the app × every kind of caller, each cell's status asserted.

Callers: nobody (anonymous), alice (owns the memory under test), bob (another user), audrey
(auditor: memory:read only), root (admin), and the platform's service token acting for alice.
Each person sends every credential they hold: their personal token (which the JSON API uses)
and their logged-in session cookie with its CSRF token (which the pages use).

Each cell starts from a fresh memory of alice's, and a refused cell must leave every table as it
was and never show alice's memory to anyone else.
"""

from __future__ import annotations

import json
from urllib.parse import urlsplit

import sqlalchemy as sa

from app.extensions import db
from app.memory import context
from app.memory.models import MemoryItem
from tests.conftest import Memories, snapshot
from tests.reliability.conftest import People, Person, signed
from tests.reliability.routes import REQUESTS, Route, app_routes

PRINCIPALS = ("anonymous", "owner", "other", "auditor", "admin", "service")
# Error codes the JSON API answers each refusal with.
CODES = {401: 1001, 403: 1002, 404: 3033}


def _row(anonymous: int, owner: int, other: int, auditor: int, admin: int,
         service: int) -> dict[str, int]:
    return dict(zip(PRINCIPALS, (anonymous, owner, other, auditor, admin, service), strict=True))


def everyone(status: int) -> dict[str, int]:
    return dict.fromkeys(PRINCIPALS, status)


# User API: any authenticated caller, each on their own data (the service token on alice's).
USER_API = _row(401, 200, 200, 200, 200, 200)
# An item of alice's: another user, an auditor or an admin find nothing there (D4).
OWNED_API = _row(401, 200, 404, 404, 404, 200)
# Admin API: the service token is refused even though it acts for someone.
ADMIN_ONLY_API = _row(401, 403, 403, 403, 200, 403)
AUDIT_API = _row(401, 403, 403, 200, 200, 403)
# Pages: a login session; without one (the service token included), to the login page.
PAGE = _row(302, 200, 200, 200, 200, 302)
OWNED_PAGE = _row(302, 200, 404, 404, 404, 302)
ADMIN_ONLY_PAGE = _row(302, 403, 403, 403, 200, 302)
AUDIT_PAGE = _row(302, 403, 403, 200, 200, 302)

MATRIX: dict[Route, dict[str, int]] = {
    ("/api/v1/memory", "GET"): USER_API,
    ("/api/v1/memory", "POST"): _row(401, 201, 201, 201, 201, 201),
    ("/api/v1/memory/<int:item_id>", "PATCH"): OWNED_API,
    ("/api/v1/memory/<int:item_id>", "DELETE"): OWNED_API,
    ("/api/v1/memory/settings", "GET"): USER_API,
    ("/api/v1/memory/settings", "PATCH"): USER_API,
    ("/api/v1/memory/projects", "GET"): USER_API,
    ("/api/v1/memory/<int:item_id>/history", "GET"): OWNED_API,
    ("/api/v1/memory/preview", "GET"): USER_API,
    ("/api/v1/memory/access-log", "GET"): USER_API,
    ("/api/v1/admin/memory", "GET"): AUDIT_API,
    ("/api/v1/admin/memory/<int:item_id>/history", "GET"): AUDIT_API,
    ("/api/v1/admin/access-log", "GET"): ADMIN_ONLY_API,
    ("/api/v1/admin/models", "GET"): ADMIN_ONLY_API,
    ("/api/v1/admin/outcomes", "GET"): ADMIN_ONLY_API,
    ("/api/v1/admin/settings", "GET"): ADMIN_ONLY_API,
    ("/api/v1/admin/settings/<path:key>", "PUT"): ADMIN_ONLY_API,
    # Only the platform's token reads the context; a personal token is not it.
    ("/api/v1/internal/memory/context", "GET"): _row(401, 401, 401, 401, 401, 200),
    # Authenticated by the body's HMAC alone: no credential of anyone's replaces it.
    ("/api/v1/webhooks/task-completed", "POST"): everyone(401),
    ("/api/openapi.json", "GET"): everyone(200),
    ("/healthz", "GET"): everyone(200),
    ("/readyz", "GET"): everyone(200),
    ("/api/docs", "GET"): everyone(200),
    ("/api/docs/assets/<name>", "GET"): everyone(200),
    # Aggregate counts only (no ids, no content), scraped by Prometheus without credentials.
    ("/metrics", "GET"): everyone(200),
    ("/static/<path:filename>", "GET"): everyone(200),
    ("/favicon.ico", "GET"): everyone(200),
    ("/login", "GET"): everyone(200),
    # An empty form: without a session there is no CSRF token (400); with one, no such user.
    ("/login", "POST"): _row(400, 401, 401, 401, 401, 400),
    ("/logout", "POST"): everyone(302),
    ("/settings/memory", "GET"): PAGE,
    ("/settings/memory/auto-capture", "PATCH"): PAGE,
    ("/settings/memory/items", "POST"): _row(302, 201, 201, 201, 201, 302),
    ("/settings/memory/items/<int:item_id>", "GET"): OWNED_PAGE,
    ("/settings/memory/items/<int:item_id>", "PATCH"): OWNED_PAGE,
    ("/settings/memory/items/<int:item_id>", "DELETE"): OWNED_PAGE,
    ("/settings/memory/items/<int:item_id>/edit", "GET"): OWNED_PAGE,
    ("/settings/memory/items/<int:item_id>/delete", "GET"): OWNED_PAGE,
    ("/settings/memory/items/<int:item_id>/status", "PATCH"): OWNED_PAGE,
    ("/settings/memory/projects", "GET"): PAGE,
    ("/settings/memory/items/<int:item_id>/history", "GET"): OWNED_PAGE,
    ("/settings/memory/preview", "GET"): PAGE,
    ("/settings/memory/usage", "GET"): PAGE,
    ("/settings/memory/access-log", "GET"): PAGE,
    ("/admin/memory", "GET"): AUDIT_PAGE,
    ("/admin/memory/items/<int:item_id>/history", "GET"): AUDIT_PAGE,
    ("/admin/settings", "GET"): ADMIN_ONLY_PAGE,
    ("/admin/settings/<path:key>", "PUT"): ADMIN_ONLY_PAGE,
    ("/admin/outcomes", "GET"): ADMIN_ONLY_PAGE,
}

# Who legitimately reads alice's memories in the answer of a route (the list pages answer
# with the list; everyone else must never see them).
REVEALS: dict[Route, set[str]] = {
    ("/api/v1/memory", "GET"): {"owner", "service"},
    ("/api/v1/admin/memory", "GET"): {"auditor", "admin"},
    ("/api/v1/memory/preview", "GET"): {"owner", "service"},
    ("/api/v1/internal/memory/context", "GET"): {"service"},
    ("/settings/memory", "GET"): {"owner"},
    ("/settings/memory/items", "POST"): {"owner"},
    ("/settings/memory/items/<int:item_id>", "GET"): {"owner"},
    ("/settings/memory/items/<int:item_id>", "DELETE"): {"owner"},
    ("/settings/memory/items/<int:item_id>/edit", "GET"): {"owner"},
    ("/settings/memory/items/<int:item_id>/delete", "GET"): {"owner"},
    ("/settings/memory/items/<int:item_id>/status", "PATCH"): {"owner"},
    ("/admin/memory", "GET"): {"auditor", "admin"},
    ("/settings/memory/items/<int:item_id>/history", "GET"): {"owner"},
    ("/settings/memory/preview", "GET"): {"owner"},
    ("/admin/memory/items/<int:item_id>/history", "GET"): {"auditor", "admin"},
}
SECRET = "只属于 alice 的记忆"


def test_every_route_of_the_app_has_a_row_in_the_matrix(app):
    """A new route fails here until someone decides who may call it."""
    routes = app_routes(app)
    assert routes - set(MATRIX) == set(), "routes without a row in MATRIX"
    assert set(MATRIX) - routes == set(), "rows of MATRIX for routes that no longer exist"
    assert set(REQUESTS) == set(MATRIX)


def _call(person: Person, route: Route, item: int, owner: int):
    request = REQUESTS[route]
    url = request.url(item=item, owner=owner)
    if request.signed:
        # Unsigned on purpose: the matrix asks whether a credential can stand in for the HMAC.
        raw = json.dumps(request.json).encode()
        return person.open(route[1], url, data=raw, content_type="application/json")
    body = request.json or request.form or {}
    # The service token writes as alice too: each cell its own words, so none is a duplicate.
    unique = {"content": f"{body['content']} · {person.name}"} if "content" in body else {}
    return person.open(route[1], url, **request.kwargs(**unique))


def _cell(app, person: Person, name: str, route: Route, item: int, owner: int) -> list[str]:
    """What is wrong with one cell (nothing: an empty list)."""
    before = snapshot(app)
    response = _call(person, route, item, owner)
    # Read it all and close it: a static file's answer holds the file open until then.
    text, body = response.get_data(as_text=True), response.get_json(silent=True)
    response.close()
    expected = MATRIX[route][name]
    where = f"{name} on {route[1]} {route[0]}"
    if response.status_code != expected:
        return [f"{where}: {response.status_code}, expected {expected}: {text[:200]}"]
    problems = []
    if route[0].startswith("/api/") and expected in CODES:
        envelope = body or {}
        if envelope.get("code") != CODES[expected] or "data" in envelope:
            problems.append(f"{where}: not the {CODES[expected]} envelope: {body}")
    if expected == 302 and urlsplit(response.headers["Location"]).path != "/login":
        problems.append(f"{where}: redirected to {response.headers['Location']}")
    # A logout's 302 is its success: it ends the caller's login session.
    if expected >= 300 and route != ("/logout", "POST") and snapshot(app) != before:
        problems.append(f"{where}: refused, yet something changed")
    if name not in REVEALS.get(route, set()) and SECRET in text:
        problems.append(f"{where}: saw alice's memory")
    return problems


def test_each_caller_gets_the_status_the_matrix_says(app, people: People, memories: Memories):
    """Every cell, each on a fresh memory of alice's; all mismatches are reported together."""
    owner = people.owner.user_id
    problems = []
    # Logging out ends the sessions the other rows need: those rows come last.
    for route in sorted(MATRIX, key=lambda r: (r[0] == "/logout", r)):
        for name, person in people.all().items():
            item = memories.add(owner, f"{SECRET}({name} · {route[1]} {route[0]})")
            problems += _cell(app, person, name, route, item, owner)
            # Gone once asked about, so alice stays under her 200 ACTIVE whatever the matrix's size.
            _forget(app, owner, item)
    assert not problems, "\n".join(problems)


def _forget(app, owner: int, item: int) -> None:
    with app.app_context():
        db.session.execute(sa.delete(MemoryItem).where(MemoryItem.id == item))
        db.session.commit()
        context.cache().invalidate(owner)


def test_the_webhook_accepts_only_its_signature(app, people: People):
    """The other side of the webhook's row: signed, it is accepted without any credential."""
    raw = json.dumps(REQUESTS[("/api/v1/webhooks/task-completed", "POST")].json).encode()
    response = people.anonymous.open("POST", "/api/v1/webhooks/task-completed", data=raw,
                                     content_type="application/json", headers=signed(raw))
    assert response.status_code == 202, response.text
