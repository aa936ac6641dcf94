"""Big bodies on every POST/PATCH/PUT route: refused cleanly (400 or 413, the envelope under
/api/), never a 500, and nothing changed.

Two sizes: over the configured MAX_CONTENT_LENGTH (1 MiB), which is refused before any route
reads it; and a 1 MB field inside an otherwise well-formed request, which the route's own
validation refuses.
"""

from __future__ import annotations

import json

import pytest
from flask import Flask

from tests.conftest import Memories, snapshot
from tests.reliability.conftest import People, signed
from tests.reliability.routes import REQUESTS, Route, app_routes

BODY_METHODS = frozenset({"POST", "PATCH", "PUT"})
ONE_MB = 1_000_000
# Routes whose body holds no field of the caller's to blow up (the logout form carries only its
# CSRF token): the 1 MB field test leaves them out; an over-limit body is 413 for them too.
NO_FIELD = {("/logout", "POST")}
# What a 1 MB field gets, where it is not a plain 400 (and its envelope code under /api/).
FIELD_ANSWER: dict[Route, tuple[int, int | None]] = {
    ("/api/v1/memory", "POST"): (400, 3034),
    ("/api/v1/memory/<int:item_id>", "PATCH"): (400, 3034),
    ("/api/v1/admin/settings/<path:key>", "PUT"): (400, 3003),
    # A 1 MB username is just a user that does not exist.
    ("/login", "POST"): (401, None),
}


def _body_routes() -> list[Route]:
    return sorted(route for route in REQUESTS if route[1] in BODY_METHODS)


def test_every_route_that_takes_a_body_is_listed(app):
    assert {r for r in app_routes(app) if r[1] in BODY_METHODS} == set(_body_routes())


@pytest.fixture
def admin_item(people: People, memories: Memories) -> int:
    """The admin can call every one of these routes; this memory is theirs."""
    return memories.add(people.admin.user_id, "root 的一条记忆")


def _send(people: People, route: Route, item: int, raw: bytes, content_type: str):
    request = REQUESTS[route]
    url = request.url(item=item, owner=people.admin.user_id)
    headers = signed(raw) if request.signed else {}
    # Every credential the admin holds: a session with its CSRF token, and the personal token.
    return people.admin.open(route[1], url, data=raw, content_type=content_type,
                             headers=headers)


def _answer_problems(response, route: Route, status: int, code: int | None) -> list[str]:
    where = f"{route[1]} {route[0]}"
    if response.status_code != status:
        return [f"{where}: {response.status_code}, expected {status}: {response.text[:200]}"]
    body = response.get_json(silent=True) or {}
    if route[0].startswith("/api/") and (body.get("code") != code or "data" in body):
        return [f"{where}: not the {code} envelope: {body}"]
    return []


def test_a_body_over_the_limit_is_413_and_changes_nothing(app: Flask, people: People,
                                                         admin_item: int):
    limit = app.config["MAX_CONTENT_LENGTH"]
    problems = []
    for route in _body_routes():
        field = REQUESTS[route].big_field or "x"
        if route[0].startswith("/api/"):
            raw = json.dumps({field: "x" * limit}).encode()
            content_type = "application/json"
        else:
            raw = f"{field}={'x' * limit}".encode()
            content_type = "application/x-www-form-urlencoded"
        before = snapshot(app)
        response = _send(people, route, admin_item, raw, content_type)
        problems += _answer_problems(response, route, 413, 2001)
        if snapshot(app) != before:
            problems.append(f"{route[1]} {route[0]}: changed something")
    assert not problems, "\n".join(problems)


def test_a_1_mb_field_is_refused_by_validation_and_changes_nothing(
        app: Flask, people: People, admin_item: int):
    problems = []
    for route in sorted(set(_body_routes()) - NO_FIELD):
        request = REQUESTS[route]
        assert request.big_field, f"{route}: a route that reads a body names its big field"
        # Three bytes a character: a 1 MB body, under the 1 MiB limit.
        fields = request.kwargs(**{request.big_field: "字" * (ONE_MB // 3)})
        if "json" in fields:
            raw = json.dumps(fields["json"], ensure_ascii=False).encode()
            content_type = "application/json"
        else:
            raw = "&".join(f"{k}={v}" for k, v in fields["data"].items()).encode()
            content_type = "application/x-www-form-urlencoded"
        assert ONE_MB - 1000 < len(raw) < app.config["MAX_CONTENT_LENGTH"]
        before = snapshot(app)
        response = _send(people, route, admin_item, raw, content_type)
        problems += _answer_problems(response, route, *FIELD_ANSWER.get(route, (400, 2001)))
        if snapshot(app) != before:
            problems.append(f"{route[1]} {route[0]}: changed something")
    assert not problems, "\n".join(problems)
