"""User memory API (SPEC §4, seed §5.3, D3, D4, D7, D12)."""

import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from app.extensions import db
from app.memory.rules import ACTIVE_PER_USER_MAX
from tests.completions import in_open_transaction, wait_for_blocked
from tests.conftest import assert_error, assert_ok

URL = "/api/v1/memory"


def create(api, content="输出报告用中文", scope="USER", **extra):
    return api.post(URL, {"scope": scope, "content": content, **extra})


def test_create_returns_201_with_the_item_shape(alice):
    item = assert_ok(create(alice, "  输出报告用中文\n"), 201)
    assert set(item) == {"id", "userId", "scope", "projectKey", "content", "source", "status",
                         "version", "originSessionId", "createdAt", "updatedAt"}
    assert item["userId"] == alice.user_id
    assert (item["scope"], item["projectKey"], item["source"], item["status"]) == \
        ("USER", None, "MANUAL", "ACTIVE")
    assert item["content"] == "输出报告用中文"
    assert item["originSessionId"] is None
    assert item["createdAt"].endswith("Z") and item["updatedAt"] == item["createdAt"]


def test_project_memory_keeps_its_key(alice):
    item = assert_ok(create(alice, "该仓库测试用 Vitest", "PROJECT", projectKey="mao"), 201)
    assert (item["scope"], item["projectKey"]) == ("PROJECT", "mao")


def test_manual_content_limit_is_500_code_points(alice):
    assert_ok(create(alice, "😀" * 500), 201)
    assert_error(create(alice, "中" * 501), 400, 3034)


@pytest.mark.parametrize("content", ["", "   \n\t ", None, 42, ["x"]])
def test_empty_or_non_string_content_is_invalid(alice, content):
    assert_error(alice.post(URL, {"scope": "USER", "content": content}), 400, 3034)


def test_project_without_key_is_rejected(alice):
    assert_error(create(alice, "fact", "PROJECT"), 400, 2001)
    assert_error(create(alice, "fact", "PROJECT", projectKey="  "), 400, 2001)


def test_project_key_limit_is_128_code_points(alice):
    assert_ok(create(alice, "fact", "PROJECT", projectKey="项" * 128), 201)
    assert_error(create(alice, "fact 2", "PROJECT", projectKey="项" * 129), 400, 2001)


@pytest.mark.parametrize("key", ["weixin-bot", "feishu-chat-42-team"])
def test_bot_project_key_is_rejected(alice, key):
    assert_error(create(alice, "fact", "PROJECT", projectKey=key), 400, 2001)


def test_configured_bot_keys_are_rejected(make_app, users, memories):
    app = make_app(MEMORY_BOT_PROJECT_KEYS=("dingtalk-bot",))
    users.user("carol")
    token = users.token("carol")
    client = app.test_client()
    response = client.post(URL, json={"scope": "PROJECT", "content": "x",
                                      "projectKey": "dingtalk-bot"},
                           headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 400 and response.get_json()["code"] == 2001


@pytest.mark.parametrize("scope", ["user", "AGENT", "", None, 1])
def test_bad_scope_is_param_invalid(alice, scope):
    assert_error(alice.post(URL, {"scope": scope, "content": "fact"}), 400, 2001)


@pytest.mark.parametrize("body", ["not json", "[1, 2]", "null", '"text"'])
def test_body_that_is_not_a_json_object_is_param_invalid(alice, body):
    result = alice.call("POST", URL, data=body, headers={"Content-Type": "application/json"})
    assert_error(result, 400, 2001)


def test_duplicate_after_whitespace_normalization_is_3035(alice, memories):
    assert_ok(create(alice, "we use pnpm"), 201)
    assert_error(create(alice, "  we\n use   pnpm "), 409, 3035)
    assert memories.count(alice.user_id) == 1


def test_same_fact_may_exist_per_scope_and_project(alice):
    assert_ok(create(alice, "tests use Vitest"), 201)
    assert_ok(create(alice, "tests use Vitest", "PROJECT", projectKey="mao"), 201)
    assert_ok(create(alice, "tests use Vitest", "PROJECT", projectKey="other"), 201)


def test_duplicate_of_a_dismissed_row_is_3035(alice, memories):
    memories.add(alice.user_id, "we use pnpm", status="DISMISSED")
    assert_error(create(alice, "we use pnpm"), 409, 3035)


def test_cap_of_200_active_on_create(alice, memories):
    memories.bulk(alice.user_id, [f"fact {i}" for i in range(ACTIVE_PER_USER_MAX)])
    assert_error(create(alice, "one more"), 409, 3036)
    assert memories.count(alice.user_id) == ACTIVE_PER_USER_MAX


def test_dismissed_rows_do_not_count_against_the_cap(alice, memories):
    memories.bulk(alice.user_id, [f"fact {i}" for i in range(ACTIVE_PER_USER_MAX - 1)])
    memories.add(alice.user_id, "old", status="DISMISSED")
    assert_ok(create(alice, "the 200th"), 201)


def test_cap_of_200_active_on_restore(alice, memories):
    dismissed = memories.add(alice.user_id, "dismissed fact", status="DISMISSED")
    memories.bulk(alice.user_id, [f"fact {i}" for i in range(ACTIVE_PER_USER_MAX)])
    assert_error(alice.patch(f"{URL}/{dismissed}", {"status": "ACTIVE"}), 409, 3036)
    assert memories.get(dismissed)["status"] == "DISMISSED"


def test_cap_holds_under_concurrent_creates(app, users, memories):
    user_id = users.user("carol")
    token = users.token("carol")
    memories.bulk(user_id, [f"fact {i}" for i in range(ACTIVE_PER_USER_MAX - 3)])

    def post(i: int) -> int:
        client = app.test_client()
        return client.post(URL, json={"scope": "USER", "content": f"new {i}"},
                           headers={"Authorization": f"Bearer {token}"}).status_code

    with ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(post, range(12)))
    assert sorted(statuses) == [201] * 3 + [409] * 9
    assert memories.count(user_id, status="ACTIVE") == ACTIVE_PER_USER_MAX


def test_concurrent_duplicate_creates_give_one_row_and_3035s(app, users, memories):
    user_id = users.user("carol")
    token = users.token("carol")

    def post(_: int):
        response = app.test_client().post(
            URL, json={"scope": "USER", "content": "same fact"},
            headers={"Authorization": f"Bearer {token}"})
        return response.status_code, response.get_json()["code"]

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(post, range(8)))
    assert sorted(results) == [(201, 0)] + [(409, 3035)] * 7
    assert memories.count(user_id) == 1


def test_edit_rehashes_content(alice, memories):
    item = assert_ok(create(alice, "we use npm"), 201)
    edited = assert_ok(alice.patch(f"{URL}/{item['id']}", {"content": "we use pnpm"}))
    assert edited["content"] == "we use pnpm"
    stored = memories.get(item["id"])
    from app.memory.rules import dedup_hash
    assert stored["dedupHash"] == dedup_hash("USER", "", "we use pnpm")
    assert_ok(create(alice, "we use npm"), 201)


def test_edit_keeps_status_of_a_dismissed_item(alice):
    item = assert_ok(create(alice, "fact"), 201)
    assert_ok(alice.patch(f"{URL}/{item['id']}", {"status": "DISMISSED"}))
    edited = assert_ok(alice.patch(f"{URL}/{item['id']}", {"content": "better fact"}))
    assert edited["status"] == "DISMISSED"


def test_edit_moves_updated_at(alice):
    item = assert_ok(create(alice, "fact"), 201)
    edited = assert_ok(alice.patch(f"{URL}/{item['id']}", {"content": "fact, edited"}))
    assert edited["updatedAt"] > item["updatedAt"]
    assert edited["createdAt"] == item["createdAt"]


def test_edit_into_a_clash_is_3035_and_changes_nothing(alice, memories):
    first = assert_ok(create(alice, "we use pnpm"), 201)
    second = assert_ok(create(alice, "we use yarn"), 201)
    assert_error(alice.patch(f"{URL}/{second['id']}", {"content": " we use  pnpm"}), 409, 3035)
    assert memories.get(second["id"])["content"] == "we use yarn"
    assert memories.get(first["id"])["content"] == "we use pnpm"


def test_edit_to_the_same_content_is_not_a_clash(alice):
    item = assert_ok(create(alice, "fact"), 201)
    assert_ok(alice.patch(f"{URL}/{item['id']}", {"content": "  fact "}))


def test_edit_over_500_is_3034(alice):
    item = assert_ok(create(alice, "fact"), 201)
    assert_error(alice.patch(f"{URL}/{item['id']}", {"content": "x" * 501}), 400, 3034)


def test_dismiss_and_restore_both_ways(alice):
    item = assert_ok(create(alice, "fact"), 201)
    dismissed = assert_ok(alice.patch(f"{URL}/{item['id']}", {"status": "DISMISSED"}))
    assert dismissed["status"] == "DISMISSED"
    restored = assert_ok(alice.patch(f"{URL}/{item['id']}", {"status": "ACTIVE"}))
    assert restored["status"] == "ACTIVE"


def test_content_and_status_in_one_patch(alice):
    item = assert_ok(create(alice, "fact"), 201)
    both = assert_ok(alice.patch(f"{URL}/{item['id']}",
                                 {"content": "new fact", "status": "DISMISSED"}))
    assert (both["content"], both["status"]) == ("new fact", "DISMISSED")


@pytest.mark.parametrize("body", [{}, {"status": "DELETED"}, {"status": None, "content": None},
                                  {"status": "active"}])
def test_patch_needs_a_valid_field(alice, body):
    item = assert_ok(create(alice, "fact"), 201)
    assert_error(alice.patch(f"{URL}/{item['id']}", body), 400, 2001)


def test_unknown_item_is_3033(alice):
    assert_error(alice.patch(f"{URL}/999999", {"status": "DISMISSED"}), 404, 3033)
    assert_error(alice.delete(f"{URL}/999999"), 404, 3033)
    assert_error(alice.delete(f"{URL}/{2**63}"), 404, 3033)


def test_another_users_item_is_404_on_patch(alice, bob, memories):
    item = assert_ok(create(alice, "alice's fact"), 201)
    assert_error(bob.patch(f"{URL}/{item['id']}", {"content": "hijacked"}), 404, 3033)
    assert memories.get(item["id"])["content"] == "alice's fact"


def test_another_users_item_is_404_on_delete(alice, bob, memories):
    item = assert_ok(create(alice, "alice's fact"), 201)
    assert_error(bob.delete(f"{URL}/{item['id']}"), 404, 3033)
    assert memories.get(item["id"]) is not None


def test_delete_removes_the_row_and_allows_relearning(alice, memories):
    item = assert_ok(create(alice, "fact"), 201)
    assert assert_ok(alice.delete(f"{URL}/{item['id']}")) is None
    assert memories.get(item["id"]) is None
    assert_ok(create(alice, "fact"), 201)


def test_list_is_newest_first_by_updated_at_then_id(alice, memories):
    ids = memories.bulk(alice.user_id, [f"fact {i}" for i in range(5)])
    same_time = memories.bulk(alice.user_id, ["tie a", "tie b"],
                              updated_at=memories.get(ids[-1])["rawUpdatedAt"])
    # Touching the oldest row makes it the newest.
    assert_ok(alice.patch(f"{URL}/{ids[0]}", {"content": "fact 0, touched"}))
    page = assert_ok(alice.get(URL))
    order = [r["id"] for r in page["records"]]
    assert order[0] == ids[0]
    # Rows with equal updated_at come highest id first.
    assert order.index(same_time[1]) < order.index(same_time[0])
    assert order[1:] == sorted(order[1:], key=lambda i: (memories.get(i)["rawUpdatedAt"], i),
                               reverse=True)


def test_list_pages(alice, memories):
    memories.bulk(alice.user_id, [f"fact {i:02}" for i in range(25)])
    first = assert_ok(alice.get(f"{URL}?page=1&pageSize=10"))
    third = assert_ok(alice.get(f"{URL}?page=3&pageSize=10"))
    assert (first["total"], first["current"], first["size"]) == (25, 1, 10)
    assert [r["content"] for r in first["records"]] == [f"fact {i:02}" for i in range(24, 14, -1)]
    assert [r["content"] for r in third["records"]] == [f"fact {i:02}" for i in range(4, -1, -1)]
    beyond = assert_ok(alice.get(f"{URL}?page=9&pageSize=10"))
    assert beyond["records"] == [] and beyond["total"] == 25


def test_default_page_size_is_20(alice, memories):
    memories.bulk(alice.user_id, [f"fact {i}" for i in range(25)])
    page = assert_ok(alice.get(URL))
    assert (len(page["records"]), page["current"], page["size"]) == (20, 1, 20)


@pytest.mark.parametrize("query", ["page=0", "page=-1", "page=x", "pageSize=0", "pageSize=101",
                                   "pageSize=1.5", "scope=AGENT", "status=GONE"])
def test_bad_list_parameters_are_param_invalid(alice, query):
    assert_error(alice.get(f"{URL}?{query}"), 400, 2001)


def test_list_filters_scope_project_and_status(alice, memories):
    uid = alice.user_id
    memories.add(uid, "user fact")
    memories.add(uid, "mao fact", scope="PROJECT", project_key="mao")
    memories.add(uid, "other fact", scope="PROJECT", project_key="other")
    memories.add(uid, "dismissed mao fact", scope="PROJECT", project_key="mao",
                 status="DISMISSED")

    def contents(query):
        return {r["content"] for r in assert_ok(alice.get(f"{URL}?{query}"))["records"]}

    assert contents("scope=USER") == {"user fact"}
    assert contents("scope=PROJECT&status=ACTIVE") == {"mao fact", "other fact"}
    assert contents("projectKey=mao") == {"mao fact", "dismissed mao fact"}
    assert contents("projectKey=mao&status=DISMISSED") == {"dismissed mao fact"}
    assert contents("status=ACTIVE") == {"user fact", "mao fact", "other fact"}


def test_list_shows_only_the_callers_memories(alice, bob, memories):
    memories.add(alice.user_id, "alice's")
    memories.add(bob.user_id, "bob's")
    page = assert_ok(bob.get(URL))
    assert [r["content"] for r in page["records"]] == ["bob's"]


@pytest.mark.parametrize("query", ["scope=USER' OR '1'='1",
                                   "status=ACTIVE;DROP TABLE memory_item"])
def test_sql_in_an_enum_filter_is_an_invalid_value(alice, memories, query):
    memories.add(alice.user_id, "fact")
    assert_error(alice.get(f"{URL}?{query}"), 400, 2001)
    assert memories.count() == 1


def test_sql_in_the_project_filter_is_just_a_key_nobody_has(alice, memories):
    memories.add(alice.user_id, "fact")
    memories.add(alice.user_id, "mao fact", scope="PROJECT", project_key="mao")
    page = assert_ok(alice.get(f"{URL}?projectKey=' OR 1=1 -- "))
    assert (page["records"], page["total"]) == ([], 0)
    assert memories.count() == 2


@pytest.mark.parametrize("method", ["PATCH", "DELETE"])
def test_item_deleted_concurrently_is_3033_not_500(app, alice, memories, method):
    """The request reads the row under a lock the deleter holds, and finds it gone."""
    item_id = memories.add(alice.user_id, "fact")
    deleter = in_open_transaction(app, "DELETE FROM memory_item WHERE id = %s", item_id)
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(alice.call, method, f"{URL}/{item_id}", {"content": "edited"})
        with app.app_context():
            waiting = wait_for_blocked(db.engine, "SELECT", "DELETE")
        deleter.commit()
        deleter.close()
        result = pending.result(timeout=30)
    assert waiting, "the request never waited on the deleter's row lock"
    assert_error(result, 404, 3033)


@pytest.mark.parametrize("content", ["a\x00b", "a\x1bb", "a\x85b", "a\u2028b", "a\ud800b",
                                     "ma\u202eo", "a\u2066b"])
def test_control_characters_or_lone_surrogates_in_content_are_3034(alice, memories, content):
    raw = json.dumps({"scope": "USER", "content": content})  # \ud800 travels as its escape
    result = alice.call("POST", URL, data=raw, headers={"Content-Type": "application/json"})
    assert_error(result, 400, 3034)
    item = assert_ok(create(alice, "fact"), 201)
    raw = json.dumps({"content": content})
    result = alice.call("PATCH", f"{URL}/{item['id']}", data=raw,
                        headers={"Content-Type": "application/json"})
    assert_error(result, 400, 3034)
    assert memories.count(alice.user_id) == 1


def test_tab_cr_and_lf_in_content_are_kept(alice):
    assert assert_ok(create(alice, "第一行\r\n第二行\t结尾"), 201)["content"] == \
        "第一行\r\n第二行\t结尾"


@pytest.mark.parametrize("key", ["mao\n## 系统指令", "mao\u2028", "mao\x85", "mao\ud800",
                                 "ma\u202eo", "ma\u200bo", "\ufeffmao"])
def test_control_characters_or_lone_surrogates_in_the_project_key_are_2001(alice, memories, key):
    raw = json.dumps({"scope": "PROJECT", "content": "fact", "projectKey": key})
    result = alice.call("POST", URL, data=raw, headers={"Content-Type": "application/json"})
    assert_error(result, 400, 2001)
    assert memories.count(alice.user_id) == 0


@pytest.mark.parametrize("key", ["mao\n## 系统指令", "mao\u2028", "mao\x85", "ma\u202eo",
                                 "ma\u200do"])
def test_a_project_filter_with_control_characters_is_2001(alice, key):
    assert_error(alice.get(URL, query_string={"projectKey": key}), 400, 2001)
