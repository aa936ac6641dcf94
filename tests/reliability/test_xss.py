"""XSS: text that users, the platform or a model wrote is rendered escaped on every page and
fragment that shows it, the audit page included.

The payloads sit in memory contents, a project key, a session's project key, a username, a model
name, a setting key in a URL, a search and a `next` parameter; each answer must contain none of
them raw, and (where it shows the text at all) its escaped form.
"""

from __future__ import annotations

import pytest
from werkzeug.test import TestResponse

from app.extensions import db
from app.system import service as system
from tests.conftest import Accounts, Memories
from tests.reliability.conftest import People, Person, log_in

SCRIPT = "<script>alert(1)</script>"
ATTRIBUTE = '"><img src=x onerror=alert(1)>'
# How Jinja's autoescape writes them.
SCRIPT_ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"
ATTRIBUTE_ESCAPED = "&#34;&gt;&lt;img src=x onerror=alert(1)&gt;"
RAW = ("<script>alert(1)", "<img src=x onerror")


def assert_escaped(response: TestResponse, *expected: str) -> None:
    html = response.get_data(as_text=True)
    assert response.status_code < 500, html[:300]
    for raw in RAW:
        assert raw not in html, f"unescaped {raw!r} in {response.request.path}"
    for text in expected:
        assert text in html, f"{text!r} not shown by {response.request.path}"


@pytest.fixture
def scene(app, people: People, memories: Memories, users: Accounts) -> dict[str, int]:
    """alice's memories with both payloads (USER, PROJECT under a payload key, DISMISSED), a
    session of hers in a payload project, a user named with a payload, and a payload model."""
    owner = people.owner.user_id
    ids = {
        "script": memories.add(owner, f"记住 {SCRIPT}"),
        "attribute": memories.add(owner, f"也记住 {ATTRIBUTE}"),
        "project": memories.add(owner, "项目级的记忆", scope="PROJECT", project_key=ATTRIBUTE),
        "dismissed": memories.add(owner, f"忽略的 {SCRIPT}", status="DISMISSED"),
    }
    from tests.page_support import Store as PageScenes

    PageScenes(app).session(owner, SCRIPT, session_id=9001)
    ids["named"] = users.user(SCRIPT)
    memories.add(ids["named"], f"名字可疑的用户的记忆 {ATTRIBUTE}")
    with app.app_context():
        system.add_model(ATTRIBUTE, SCRIPT)
        db.session.remove()
    return ids


HX = {"HX-Request": "true"}


def test_my_memory_page_and_its_fragments_escape_content(people: People, scene):
    owner = people.owner
    assert_escaped(owner.open("GET", "/settings/memory"), SCRIPT_ESCAPED, ATTRIBUTE_ESCAPED)
    assert_escaped(owner.open("GET", "/settings/memory", headers=HX),
                   SCRIPT_ESCAPED, ATTRIBUTE_ESCAPED)
    assert_escaped(owner.open("GET", "/settings/memory?status=DISMISSED", headers=HX),
                   SCRIPT_ESCAPED)
    assert_escaped(owner.open("GET", "/settings/memory?scope=PROJECT", headers=HX),
                   ATTRIBUTE_ESCAPED)
    for key in ("script", "attribute"):
        expected = SCRIPT_ESCAPED if key == "script" else ATTRIBUTE_ESCAPED
        assert_escaped(owner.open("GET", f"/settings/memory/items/{scene[key]}"), expected)
        assert_escaped(owner.open("GET", f"/settings/memory/items/{scene[key]}/edit"), expected)
        assert_escaped(owner.open("GET", f"/settings/memory/items/{scene[key]}/delete"),
                       expected)
    assert_escaped(owner.open("GET", "/settings/memory/projects?scope=PROJECT"), SCRIPT_ESCAPED)


def test_fragments_answering_writes_escape_content(people: People, scene):
    owner = people.owner
    item = scene["script"]
    # A saved edit answers the row; a refused one the form with what was typed.
    assert_escaped(owner.open("PATCH", f"/settings/memory/items/{item}",
                              data={"content": f"改成 {ATTRIBUTE}"}), ATTRIBUTE_ESCAPED)
    assert_escaped(owner.open("PATCH", f"/settings/memory/items/{item}",
                              data={"content": SCRIPT * 40}), SCRIPT_ESCAPED)
    assert_escaped(owner.open("POST", "/settings/memory/items",
                              data={"scope": "USER", "content": f"新的 {SCRIPT}"}),
                   SCRIPT_ESCAPED)
    assert_escaped(owner.open("POST", "/settings/memory/items",
                              data={"scope": "PROJECT", "projectKey": SCRIPT,
                                    "content": "项目里的新记忆"}))
    assert_escaped(owner.open("PATCH", f"/settings/memory/items/{scene['attribute']}/status",
                              data={"new_status": "DISMISSED", "status": "DISMISSED"}),
                   ATTRIBUTE_ESCAPED)
    # A deleted row says which memory went.
    assert_escaped(owner.open("DELETE", f"/settings/memory/items/{scene['dismissed']}"),
                   SCRIPT_ESCAPED)


def test_the_audit_page_escapes_content_names_and_the_search(people: People, scene):
    auditor = people.auditor
    owner = people.owner.user_id
    for headers in ({}, HX):
        assert_escaped(auditor.open("GET", f"/admin/memory?userId={owner}", headers=headers),
                       SCRIPT_ESCAPED, ATTRIBUTE_ESCAPED)
        assert_escaped(auditor.open("GET", f"/admin/memory?userId={owner}&scope=PROJECT",
                                    headers=headers), ATTRIBUTE_ESCAPED)
    # The search finds the user named with a payload, and shows the search itself.
    assert_escaped(auditor.open("GET", "/admin/memory", query_string={"q": "script"}),
                   SCRIPT_ESCAPED)
    assert_escaped(auditor.open("GET", "/admin/memory", query_string={"q": ATTRIBUTE}),
                   ATTRIBUTE_ESCAPED)
    assert_escaped(auditor.open("GET", f"/admin/memory?userId={scene['named']}"),
                   SCRIPT_ESCAPED, ATTRIBUTE_ESCAPED)


def test_admin_settings_escape_model_names_values_and_keys(people: People, scene):
    admin = people.admin
    assert_escaped(admin.open("GET", "/admin/settings"), SCRIPT_ESCAPED, ATTRIBUTE_ESCAPED)
    # A refused value comes back in the form, with the reason.
    assert_escaped(admin.open("PUT", "/admin/settings/memory.extractionModelId",
                              data={"value": ATTRIBUTE}), ATTRIBUTE_ESCAPED)
    assert_escaped(admin.open("PUT", f"/admin/settings/{SCRIPT}", data={"value": ""}))


def test_login_escapes_next_and_the_navigation_escapes_the_username(app, scene):
    client = app.test_client()
    assert_escaped(client.get("/login", query_string={"next": ATTRIBUTE}), ATTRIBUTE_ESCAPED)
    named = Person(SCRIPT, scene["named"], client)
    named.csrf = log_in(client, SCRIPT)
    assert_escaped(named.open("GET", "/settings/memory"), SCRIPT_ESCAPED, ATTRIBUTE_ESCAPED)


def test_the_json_api_never_answers_html(people: People, scene):
    """Content goes back as JSON, raw: a browser never renders it as a page."""
    response = people.owner.open("GET", "/api/v1/memory")
    assert response.mimetype == "application/json"
    contents = [r["content"] for r in response.get_json()["data"]["records"]]
    assert f"记住 {SCRIPT}" in contents
