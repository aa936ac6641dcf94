"""Every memory carries `version`, raised by one on every change of content, status, scope or
project key, by anyone; a touch leaves it (SPEC §11 "No lost updates")."""

import sqlalchemy as sa

from app.extensions import db
from tests.conftest import assert_ok

URL = "/api/v1/memory"


def create(api, content="输出报告用中文"):
    return assert_ok(api.post(URL, {"scope": "USER", "content": content}), 201)


def edit(api, item_id, **changes):
    return assert_ok(api.patch(f"{URL}/{item_id}", changes))


def test_a_new_memory_is_version_1(alice):
    assert create(alice)["version"] == 1


def test_an_edit_of_the_words_raises_the_version(alice):
    item = create(alice)
    assert edit(alice, item["id"], content="输出报告用英文")["version"] == 2


def test_an_edit_to_the_same_words_changes_nothing_and_keeps_the_version(alice):
    item = create(alice)
    assert edit(alice, item["id"], content=item["content"])["version"] == 1


def test_dismiss_and_restore_each_raise_the_version(alice):
    item = create(alice)
    assert edit(alice, item["id"], status="DISMISSED")["version"] == 2
    assert edit(alice, item["id"], status="ACTIVE")["version"] == 3


def test_every_list_item_carries_its_version(alice):
    item = create(alice)
    edit(alice, item["id"], content="输出报告用英文")
    listed = assert_ok(alice.get(URL))["records"]
    assert [(i["id"], i["version"]) for i in listed] == [(item["id"], 2)]


def test_a_row_inserted_by_hand_is_version_1(app, alice):
    with app.app_context():
        db.session.execute(sa.text(
            "INSERT INTO memory_item (user_id, scope, project_key, content, source, status, "
            "dedup_hash, created_at, updated_at) VALUES (:user, 'USER', '', '手写的一行', "
            "'MANUAL', 'ACTIVE', :digest, :now, :now)"),
            {"user": alice.user_id, "digest": "f" * 40, "now": "2026-12-01 00:00:00"})
        db.session.commit()
    assert [i["version"] for i in assert_ok(alice.get(URL))["records"]] == [1]


def test_the_audit_list_carries_each_items_version(alice, auditor):
    item = create(alice)
    edit(alice, item["id"], status="DISMISSED")
    page = assert_ok(auditor.get(f"/api/v1/admin/memory?userId={alice.user_id}"))
    assert [(i["id"], i["version"]) for i in page["records"]] == [(item["id"], 2)]
