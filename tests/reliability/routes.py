"""One well-formed request for every route of the app, for the security tests to vary.

Keyed by (url rule, method) exactly as `app.url_map` lists them, so the tests can insist that a
new route gets an entry. `{item}` in a path is the id of a memory of the person the test says
owns it, `{owner}` that person's user id, `{key}` the one editable system setting.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flask import Flask

from tests.reliability.conftest import EXTRACTION_MODEL_KEY

IGNORED_METHODS = frozenset({"HEAD", "OPTIONS"})
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})

Route = tuple[str, str]


@dataclass(frozen=True)
class Request:
    """What to send: a path template and a JSON body or form fields (or neither)."""

    path: str
    json: dict[str, Any] | None = None
    form: dict[str, str] | None = None
    # The field a test may blow up to probe size limits (None: the route reads no body).
    big_field: str | None = None
    # Authenticated by an HMAC of the body instead of a credential (the webhook).
    signed: bool = False

    def url(self, *, item: int = 0, owner: int = 0) -> str:
        """`{item}`: a memory id; `{owner}`: the user id an admin or the platform asks about."""
        return self.path.format(item=item, owner=owner, key=EXTRACTION_MODEL_KEY)

    def kwargs(self, **overrides: Any) -> dict[str, Any]:
        """Test client keyword arguments for the body, a field replaced where asked."""
        if self.json is not None:
            return {"json": {**self.json, **overrides}}
        if self.form is not None:
            return {"data": {**self.form, **overrides}}
        return {}


def webhook_event(**fields: Any) -> dict[str, Any]:
    body = {"eventId": "evt-security", "sessionId": 4242, "userId": 4242, "projectKey": "mao",
            "sessionType": "NORMAL", "channel": "WEB", "phase": "COMPLETED",
            "lastUserMessage": "以后所有的报告都请用中文来写,谢谢你的帮助",
            "lastAssistantMessage": "好的,以后报告都用中文写。"}
    body.update(fields)
    return body


REQUESTS: dict[Route, Request] = {
    # JSON API: user
    ("/api/v1/memory", "GET"): Request("/api/v1/memory"),
    ("/api/v1/memory", "POST"): Request(
        "/api/v1/memory", json={"scope": "USER", "content": "新写的一条记忆"},
        big_field="content"),
    ("/api/v1/memory/<int:item_id>", "PATCH"): Request(
        "/api/v1/memory/{item}", json={"content": "改过的内容"}, big_field="content"),
    ("/api/v1/memory/<int:item_id>", "DELETE"): Request("/api/v1/memory/{item}"),
    ("/api/v1/memory/settings", "GET"): Request("/api/v1/memory/settings"),
    ("/api/v1/memory/settings", "PATCH"): Request(
        "/api/v1/memory/settings", json={"autoCaptureEnabled": True},
        big_field="autoCaptureEnabled"),
    ("/api/v1/memory/projects", "GET"): Request("/api/v1/memory/projects"),
    ("/api/v1/memory/<int:item_id>/history", "GET"): Request("/api/v1/memory/{item}/history"),
    ("/api/v1/memory/preview", "GET"): Request("/api/v1/memory/preview?projectKey=mao"),
    ("/api/v1/memory/access-log", "GET"): Request("/api/v1/memory/access-log"),
    # JSON API: admin
    ("/api/v1/admin/memory", "GET"): Request("/api/v1/admin/memory?userId={owner}"),
    ("/api/v1/admin/memory/<int:item_id>/history", "GET"): Request(
        "/api/v1/admin/memory/{item}/history"),
    ("/api/v1/admin/access-log", "GET"): Request("/api/v1/admin/access-log"),
    ("/api/v1/admin/models", "GET"): Request("/api/v1/admin/models"),
    ("/api/v1/admin/outcomes", "GET"): Request("/api/v1/admin/outcomes"),
    ("/api/v1/admin/settings", "GET"): Request("/api/v1/admin/settings"),
    ("/api/v1/admin/settings/<path:key>", "PUT"): Request(
        "/api/v1/admin/settings/{key}", json={"value": ""}, big_field="value"),
    # Platform
    ("/api/v1/internal/memory/context", "GET"): Request(
        "/api/v1/internal/memory/context?userId={owner}&projectKey=mao"),
    ("/api/v1/webhooks/task-completed", "POST"): Request(
        "/api/v1/webhooks/task-completed", json=webhook_event(), big_field="eventId",
        signed=True),
    # Public
    ("/api/openapi.json", "GET"): Request("/api/openapi.json"),
    ("/healthz", "GET"): Request("/healthz"),
    ("/readyz", "GET"): Request("/readyz"),
    ("/api/docs", "GET"): Request("/api/docs"),
    ("/api/docs/assets/<name>", "GET"): Request("/api/docs/assets/swagger_preset.js"),
    ("/metrics", "GET"): Request("/metrics"),
    ("/static/<path:filename>", "GET"): Request("/static/app.css"),
    ("/favicon.ico", "GET"): Request("/favicon.ico"),
    # Login
    ("/login", "GET"): Request("/login"),
    ("/login", "POST"): Request("/login", form={"username": "", "password": ""},
                                big_field="username"),
    ("/logout", "POST"): Request("/logout", form={}),
    # 我的记忆 pages
    ("/settings/memory", "GET"): Request("/settings/memory"),
    ("/settings/memory/auto-capture", "PATCH"): Request(
        "/settings/memory/auto-capture", form={"enabled": "true"}, big_field="enabled"),
    ("/settings/memory/items", "POST"): Request(
        "/settings/memory/items", form={"scope": "USER", "content": "页面上新增的记忆"},
        big_field="content"),
    ("/settings/memory/items/<int:item_id>", "GET"): Request("/settings/memory/items/{item}"),
    ("/settings/memory/items/<int:item_id>", "PATCH"): Request(
        "/settings/memory/items/{item}", form={"content": "页面上改过的内容"},
        big_field="content"),
    ("/settings/memory/items/<int:item_id>", "DELETE"): Request(
        "/settings/memory/items/{item}"),
    ("/settings/memory/items/<int:item_id>/edit", "GET"): Request(
        "/settings/memory/items/{item}/edit"),
    ("/settings/memory/items/<int:item_id>/delete", "GET"): Request(
        "/settings/memory/items/{item}/delete"),
    ("/settings/memory/items/<int:item_id>/status", "PATCH"): Request(
        "/settings/memory/items/{item}/status", form={"new_status": "DISMISSED"},
        big_field="new_status"),
    ("/settings/memory/projects", "GET"): Request("/settings/memory/projects?scope=PROJECT"),
    ("/settings/memory/items/<int:item_id>/history", "GET"): Request(
        "/settings/memory/items/{item}/history"),
    ("/settings/memory/preview", "GET"): Request("/settings/memory/preview?projectKey=mao"),
    ("/settings/memory/usage", "GET"): Request("/settings/memory/usage"),
    ("/settings/memory/access-log", "GET"): Request("/settings/memory/access-log"),
    # Admin pages
    ("/admin/memory", "GET"): Request("/admin/memory?userId={owner}"),
    ("/admin/memory/items/<int:item_id>/history", "GET"): Request(
        "/admin/memory/items/{item}/history"),
    ("/admin/settings", "GET"): Request("/admin/settings"),
    ("/admin/settings/<path:key>", "PUT"): Request(
        "/admin/settings/{key}", form={"value": ""}, big_field="value"),
    ("/admin/outcomes", "GET"): Request("/admin/outcomes?userId={owner}&status=succeeded"),
}


def app_routes(app: Flask) -> set[Route]:
    """(rule, method) of every route the app serves."""
    return {(rule.rule, method) for rule in app.url_map.iter_rules()
            for method in rule.methods - IGNORED_METHODS}
