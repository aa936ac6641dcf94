"""The harness: its shared app (reused while no test changes it, replaced as soon as one does)
and its snapshot of the database ("nothing changed")."""

from __future__ import annotations

from app.extensions import db
from tests.conftest import DefaultApp, snapshot


def test_the_default_app_is_reused_by_the_next_test_when_nothing_changed_it():
    shared = DefaultApp()
    first = shared.get()
    shared.after_test(clean=True)
    assert shared.get() is first


def test_a_test_that_changed_the_default_apps_configuration_gets_it_replaced():
    shared = DefaultApp()
    first = shared.get()
    first.config["MEMORY_BOT_PROJECT_KEYS"] = ("another-bot",)
    shared.after_test(clean=True)
    assert shared.get() is not first
    assert shared.get().config["MEMORY_BOT_PROJECT_KEYS"] == ("weixin-bot",)


def test_a_change_inside_a_configuration_value_is_seen_too():
    shared = DefaultApp()
    first = shared.get()
    first.config["SQLALCHEMY_ENGINE_OPTIONS"]["pool_size"] = 1
    shared.after_test(clean=True)
    assert shared.get() is not first


def test_a_test_that_replaced_an_extension_or_added_a_route_gets_it_replaced():
    shared = DefaultApp()
    first = shared.get()
    first.extensions["context_cache"] = object()
    shared.after_test(clean=True)
    second = shared.get()
    assert second is not first
    second.add_url_rule("/extra", "extra", lambda: "")
    shared.after_test(clean=True)
    assert shared.get() is not second


def test_a_test_that_left_something_behind_gets_the_app_replaced():
    shared = DefaultApp()
    first = shared.get()
    shared.after_test(clean=False)
    assert shared.get() is not first


def test_a_snapshot_sees_a_row_added_to_any_table(app, memories, users):
    before = snapshot(app)
    assert set(before) == {table.name for table in db.metadata.sorted_tables}
    alice = users.user("alice")
    after_user = snapshot(app)
    assert after_user != before
    memories.add(alice, "报告用中文")
    assert snapshot(app)["memory_item"] != after_user["memory_item"]
