"""SQL injection strings in every query parameter of every GET route: each answer is a 200 that
shows nothing it should not, or a clean 400; never a 500, and every table stays as it was.

alice, who asks, has no memories, outcomes or sessions; bob has all of them. So any row in a
200 answer would be one the injection made appear.
"""

from __future__ import annotations

import pytest
from flask import Flask

from app.extensions import db
from app.extraction.models import JobOutcome
from tests.conftest import Memories, openapi_document, snapshot
from tests.reliability.conftest import People, Person
from tests.reliability.routes import REQUESTS, Route, app_routes

PAYLOADS = (
    "' OR '1'='1",
    "' OR 1=1 -- ",
    '" OR ""="',
    "1; DROP TABLE memory_item; --",
    "1' UNION SELECT id, content FROM memory_item -- ",
    "%' OR '%'='",
    "\\' OR 1=1 #",
    "1) OR SLEEP(5) -- ",
    "ACTIVE' OR status LIKE '%",
    "0x41435449564",
    "USER\x00' OR 1=1",
    "%",
    "_",
    # Not SQL, but digits Python calls digits and int() cannot read.
    "²",
    "9" * 40,
)
BOB_SECRET = "bob 的秘密记忆"

# The query parameters of the page routes (the JSON API's come from the OpenAPI document).
PAGE_PARAMETERS: dict[Route, tuple[str, ...]] = {
    ("/settings/memory", "GET"): ("scope", "status", "page", "q", "project"),
    ("/settings/memory/projects", "GET"): ("scope",),
    ("/settings/memory/items/<int:item_id>/history", "GET"): (),
    ("/settings/memory/preview", "GET"): ("projectKey",),
    ("/settings/memory/usage", "GET"): (),
    ("/settings/memory/access-log", "GET"): ("page",),
    ("/admin/memory/items/<int:item_id>/history", "GET"): (),
    ("/settings/memory/items/<int:item_id>", "GET"): ("focus",),
    ("/settings/memory/items/<int:item_id>/edit", "GET"): (),
    ("/settings/memory/items/<int:item_id>/delete", "GET"): (),
    ("/admin/memory", "GET"): ("q", "userId", "scope", "status", "page", "text"),
    ("/admin/settings", "GET"): (),
    ("/admin/outcomes", "GET"): ("status", "userId", "page"),
    ("/login", "GET"): ("next",),
    ("/healthz", "GET"): (),
    ("/readyz", "GET"): (),
    ("/api/docs", "GET"): (),
    ("/api/docs/assets/<name>", "GET"): (),
    ("/metrics", "GET"): (),
    ("/static/<path:filename>", "GET"): (),
    ("/favicon.ico", "GET"): (),
    ("/api/openapi.json", "GET"): (),
}
# Who asks: the least privileged caller each route lets in.
CALLER: dict[str, str] = {"/api/v1/admin/memory": "auditor", "/api/v1/admin/": "admin",
                          "/api/v1/internal/": "service", "/admin/memory": "auditor",
                          "/admin/": "admin"}


def _api_parameters(document: dict, rule: str) -> tuple[str, ...]:
    path = rule.replace("<int:item_id>", "{item_id}").replace("<path:key>", "{key}")
    operation = document["paths"].get(path, {}).get("get", {})
    return tuple(p["name"] for p in operation.get("parameters", []) if p["in"] == "query")


def _get_routes() -> list[Route]:
    return sorted(route for route in REQUESTS if route[1] == "GET")


def parameters(document: dict, route: Route) -> tuple[str, ...]:
    if route[0].startswith("/api/v1/"):
        return _api_parameters(document, route[0])
    return PAGE_PARAMETERS[route]


def test_every_get_route_has_its_query_parameters_listed(app):
    gets = {route for route in app_routes(app) if route[1] == "GET"}
    assert gets == set(_get_routes())
    assert {r for r in gets if not r[0].startswith("/api/v1/")} == set(PAGE_PARAMETERS)


@pytest.fixture
def bob_has_everything(app: Flask, people: People, memories: Memories) -> None:
    bob = people.other.user_id
    memories.bulk(bob, [f"{BOB_SECRET} {i}" for i in range(5)])
    memories.add(bob, f"{BOB_SECRET} 项目", scope="PROJECT", project_key="mao")
    memories.add(bob, f"{BOB_SECRET} 忽略", status="DISMISSED")
    from tests.page_support import Store as PageScenes

    PageScenes(app).session(bob, "mao", session_id=777)
    with app.app_context():
        db.session.add(JobOutcome(kind="extraction", job_id="extract-bob", user_id=bob,
                                  status="succeeded", reason="applied", attempts=1, inserted=1,
                                  touched=0, updated=0, dropped=0, demoted=0, duration_ms=5))
        db.session.commit()
        db.session.remove()


def _caller(people: People, path: str) -> Person:
    for prefix, name in CALLER.items():
        if path.startswith(prefix):
            return getattr(people, name)
    return people.owner


def _leaks(response, where: str) -> list[str]:
    """Whatever a 200 shows that alice has no right to, or that an injection conjured up."""
    text = response.get_data(as_text=True)
    body = response.get_json(silent=True)
    data = body.get("data") if isinstance(body, dict) else None
    found = {"bob's memory": BOB_SECRET in text,
             "users found by the search": 'class="user-results"' in text}
    if isinstance(data, dict):
        found["records"] = bool(data.get("records") or data.get("total"))
        found["memories to inject"] = bool(data.get("memories") or data.get("prompt"))
        found["projects"] = bool(data.get("projects"))
    return [f"{where}: {what}" for what, leaked in found.items() if leaked]


def test_injection_strings_in_query_parameters_are_harmless(app, people: People,
                                                           bob_has_everything):
    before = snapshot(app)
    document = openapi_document(app)
    problems = []
    for route in _get_routes():
        caller = _caller(people, route[0])
        path, _, fixed = REQUESTS[route].url(owner=people.owner.user_id).partition("?")
        # alice's item 0 does not exist: the row routes answer 404, and only those.
        allowed = (404,) if "<int:item_id>" in route[0] else (200, 400)
        for name in parameters(document, route):
            for payload in PAYLOADS:
                query = dict(part.split("=", 1) for part in fixed.split("&") if part)
                query[name] = payload
                response = caller.open("GET", path, query_string=query)
                where = f"{path} {name}={payload!r}: {response.status_code}"
                if response.status_code not in allowed:
                    problems.append(f"{where} {response.text[:200]}")
                elif response.status_code == 200:
                    problems += _leaks(response, where)
    assert not problems, "\n".join(problems)
    # An audit read is recorded for its subject to see (SPEC §8); nothing else changes.
    after = snapshot(app)
    assert {t: rows for t, rows in after.items() if t != "memory_access_log"} == \
        {t: rows for t, rows in before.items() if t != "memory_access_log"}
    assert {(row[1], row[2]) for row in after["memory_access_log"]} <= \
        {(people.auditor.user_id, people.owner.user_id)}


@pytest.mark.parametrize("path", [
    "/settings/memory/items/1%20OR%201=1",
    "/settings/memory/items/1;DROP%20TABLE%20memory_item",
    "/api/v1/memory/1%20OR%201=1",
    "/static/../app/config.py",
    "/static/%2e%2e/app/config.py",
    "/api/v1/admin/settings/memory.extractionModelId'%20OR%20'1'='1",
])
def test_injection_strings_in_the_path_find_no_route(app, people: People, bob_has_everything,
                                                      path: str):
    before = snapshot(app)
    method = "PUT" if "/admin/settings/" in path else "GET"
    response = people.admin.open(method, path, json={"value": ""})
    assert response.status_code in (400, 404, 405), (path, response.status_code)
    assert BOB_SECRET not in response.get_data(as_text=True)
    assert snapshot(app) == before
