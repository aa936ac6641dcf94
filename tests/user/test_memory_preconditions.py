"""No lost updates over HTTP (SPEC §11): an answer that returns one memory carries its version as
`ETag`; `PATCH` and `DELETE` of a memory take `If-Match` and, when the memory has moved on,
change nothing and answer 412 (3037) with the memory as it is now. Without `If-Match` the last
write wins, as before."""

from concurrent.futures import ThreadPoolExecutor

import pytest

from app.extensions import db
from tests.completions import in_open_transaction, wait_for_blocked
from tests.conftest import assert_error, assert_ok

URL = "/api/v1/memory"


def create(api, content="输出报告用中文"):
    return assert_ok(api.post(URL, {"scope": "USER", "content": content}), 201)


def if_match(tag):
    return {"headers": {"If-Match": tag}}


def assert_conflict(response, current):
    """412/3037, a message in words, and — unlike every other failure — the item as it is now,
    its version also in ETag."""
    assert response.status_code == 412, response.get_json()
    body = response.get_json()
    assert body["code"] == 3037
    assert isinstance(body["message"], str) and " " in body["message"]
    assert body["data"] == current
    assert response.headers["ETag"] == f'"{current["version"]}"'


def test_create_answers_etag_of_version_1(alice):
    response = alice.client.post(URL, json={"scope": "USER", "content": "fact"},
                                 headers=alice.headers)
    assert response.status_code == 201
    assert response.headers["ETag"] == '"1"'


def test_an_edit_answers_etag_of_its_new_version(alice):
    item = create(alice)
    response = alice.client.patch(f"{URL}/{item['id']}", json={"content": "输出报告用英文"},
                                  headers=alice.headers)
    assert response.status_code == 200
    assert response.headers["ETag"] == '"2"'


@pytest.mark.parametrize("tag", ['"1"', 'W/"1"', '"7", "1"', "*"])
def test_an_edit_with_if_match_naming_the_current_version_applies(alice, tag):
    item = create(alice)
    edited = assert_ok(alice.patch(f"{URL}/{item['id']}", {"content": "输出报告用英文"},
                                   **if_match(tag)))
    assert (edited["content"], edited["version"]) == ("输出报告用英文", 2)


@pytest.mark.parametrize("change", [{"content": "输出报告用法文"}, {"status": "DISMISSED"},
                                    {"content": "输出报告用法文", "status": "DISMISSED"}])
def test_a_change_from_an_old_version_changes_nothing_and_is_412_with_the_item_as_now(
        alice, memories, change):
    item = create(alice)
    now = assert_ok(alice.patch(f"{URL}/{item['id']}", {"content": "输出报告用英文"}))
    response = alice.client.patch(f"{URL}/{item['id']}", json=change,
                                  headers={**alice.headers, "If-Match": '"1"'})
    assert_conflict(response, now)
    stored = memories.get(item["id"])
    assert (stored["content"], stored["status"], stored["version"]) == \
        ("输出报告用英文", "ACTIVE", 2)


@pytest.mark.parametrize("tag", ['"abc"', '"2x"', 'W/"0"', '"99999999999999999999999"'])
def test_an_if_match_that_names_no_version_of_the_memory_is_412(alice, memories, tag):
    item = create(alice)
    response = alice.client.patch(f"{URL}/{item['id']}", json={"content": "输出报告用英文"},
                                  headers={**alice.headers, "If-Match": tag})
    assert_conflict(response, item)
    assert memories.get(item["id"])["content"] == "输出报告用中文"


def test_the_version_is_checked_before_the_words_clash(alice):
    """A stale change is refused for being stale: its words are judged on the new version."""
    first = create(alice, "用 npm")
    item = create(alice)
    now = assert_ok(alice.patch(f"{URL}/{item['id']}", {"content": "输出报告用英文"}))
    response = alice.client.patch(f"{URL}/{item['id']}", json={"content": first["content"]},
                                  headers={**alice.headers, "If-Match": '"1"'})
    assert_conflict(response, now)


def test_without_if_match_the_last_write_wins(alice):
    item = create(alice)
    assert_ok(alice.patch(f"{URL}/{item['id']}", {"content": "输出报告用英文"}))
    last = assert_ok(alice.patch(f"{URL}/{item['id']}", {"content": "输出报告用法文"}))
    assert (last["content"], last["version"]) == ("输出报告用法文", 3)


def test_a_delete_from_an_old_version_keeps_the_memory_and_is_412(alice, memories):
    item = create(alice)
    now = assert_ok(alice.patch(f"{URL}/{item['id']}", {"status": "DISMISSED"}))
    response = alice.client.delete(f"{URL}/{item['id']}",
                                   headers={**alice.headers, "If-Match": '"1"'})
    assert_conflict(response, now)
    assert memories.get(item["id"]) is not None


@pytest.mark.parametrize("tag", ['"2"', 'W/"2"'])
def test_a_delete_with_the_current_version_deletes(alice, memories, tag):
    item = create(alice)
    assert_ok(alice.patch(f"{URL}/{item['id']}", {"status": "DISMISSED"}))
    assert assert_ok(alice.delete(f"{URL}/{item['id']}", **if_match(tag))) is None
    assert memories.get(item["id"]) is None


@pytest.mark.parametrize("method", ["PATCH", "DELETE"])
def test_if_match_on_another_users_memory_is_404_not_412(alice, bob, method):
    item = create(alice)
    assert_error(bob.call(method, f"{URL}/{item['id']}", {"content": "bob's"},
                          **if_match('"9"')), 404, 3033)


def test_two_concurrent_edits_from_the_same_version_one_wins_the_other_is_412(
        app, alice, memories):
    """Both requests read the version only under the row lock: they are held at the same lock,
    and when it goes, the second sees the first's version. (A check read before the lock would
    let both through: the last one would silently overwrite the first.)"""
    item = create(alice)
    # A slow writer holds the row's lock while both edits arrive.
    holder = in_open_transaction(app, "SELECT id FROM memory_item WHERE id = %s FOR UPDATE",
                                 item["id"])

    def save(words):
        response = app.test_client().patch(f"{URL}/{item['id']}", json={"content": words},
                                           headers={**alice.headers, "If-Match": '"1"'})
        return response.status_code, response.get_json()

    with ThreadPoolExecutor(2) as pool:
        pending = [pool.submit(save, words) for words in ("A 的说法", "B 的说法")]
        with app.app_context():
            waiting = wait_for_blocked(db.engine, "SELECT", at_least=2)
        holder.commit()
        holder.close()
        results = [p.result(timeout=30) for p in pending]
    assert waiting, "the two edits never met at the row lock"
    assert sorted(status for status, _ in results) == [200, 412]
    (winner,) = [body["data"] for status, body in results if status == 200]
    (loser,) = [body for status, body in results if status == 412]
    assert (winner["version"], loser["code"], loser["data"]) == (2, 3037, winner)
    assert memories.get(item["id"])["content"] == winner["content"]
