"""我的记忆 loses no update (SPEC §11): every change a row sends names the version it shows
(If-Match); a row out of date changes nothing — an edit comes back as both wordings side by
side with 保留我的 and 用现在的, a status change or delete as the row as it is now, saying what
changed."""

from __future__ import annotations

import html
import json
import re

import pytest

from app.memory.rules import dedup_hash

ITEMS = "/settings/memory/items"


def if_match(version: int) -> dict[str, str]:
    return {"If-Match": f'"{version}"'}


def sent_if_match(fragment: str) -> list[str]:
    """The If-Match of every hx-headers in a page or fragment that sends one."""
    sent = [json.loads(html.unescape(raw)) for raw in re.findall(r"hx-headers='([^']*)'",
                                                                 fragment)]
    return [headers["If-Match"] for headers in sent if "If-Match" in headers]


def changed_elsewhere(page, item: int, *, content: str | None = None,
                      status: str | None = None) -> None:
    """Another tab, showing the memory as it is now, changes it: its version moves on."""
    if content is not None:
        _as_shown(page, item, f"{ITEMS}/{item}", {"content": content})
    if status is not None:
        _as_shown(page, item, f"{ITEMS}/{item}/status", {"new_status": status})


def _as_shown(page, item: int, path: str, form: dict[str, str]) -> None:
    (tag,) = sent_if_match(page.htmx("GET", f"{ITEMS}/{item}").text)
    assert page.htmx("PATCH", path, form, headers={"If-Match": tag}).status_code == 200


def words(content: str) -> str:
    """The hash of the words a row shows (what it sends as `shown_words`)."""
    return dedup_hash("USER", "", content)


@pytest.mark.parametrize("path", ["{}", "{}/edit", "{}/delete"])
def test_every_row_state_sends_the_version_it_shows(alice_page, store, path):
    item = store.add(alice_page.user_id, "旧内容")
    changed_elsewhere(alice_page, item, content="改过的内容")
    fragment = alice_page.htmx("GET", f"{ITEMS}/{path.format(item)}").text
    assert sent_if_match(fragment) == ['"2"']


def test_the_list_rows_send_their_versions(alice_page, store):
    first, second = store.add_many(alice_page.user_id, ["第一条", "第二条"])
    changed_elsewhere(alice_page, second, content="改过的第二条")
    page = alice_page.get("/settings/memory").text
    assert sorted(sent_if_match(page)) == ['"1"', '"2"']


def test_a_saved_edit_row_sends_the_new_version(alice_page, store):
    item = store.add(alice_page.user_id, "旧内容")
    response = alice_page.htmx("PATCH", f"{ITEMS}/{item}", {"content": "新内容"},
                               headers=if_match(1))
    assert response.status_code == 200
    assert sent_if_match(response.text) == ['"2"']


def test_an_edit_of_a_memory_changed_elsewhere_shows_both_wordings_and_saves_nothing(
        alice_page, store):
    item = store.add(alice_page.user_id, "旧内容")
    changed_elsewhere(alice_page, item, content="A 改的内容")
    response = alice_page.htmx("PATCH", f"{ITEMS}/{item}", {"content": "B 写的内容"},
                               headers=if_match(1))
    assert response.status_code == 412
    text = response.text
    assert f'id="memory-{item}"' in text and "conflict" in text
    assert "\nB 写的内容</textarea>" in text  # what was typed, still editable
    assert '<p class="memory-content stored">A 改的内容</p>' in text
    assert ">保留我的<" in text and ">用现在的<" in text
    assert "这条记忆在你编辑时已在别处改动" in text
    # 保留我的 saves on the version shown now.
    assert sent_if_match(text) == ['"2"']
    assert store.get(item)["content"] == "A 改的内容"


def test_keep_mine_saves_the_typed_words_on_the_new_version(alice_page, store):
    item = store.add(alice_page.user_id, "旧内容")
    changed_elsewhere(alice_page, item, content="A 改的内容")
    response = alice_page.htmx("PATCH", f"{ITEMS}/{item}", {"content": "B 写的内容"},
                               headers=if_match(2))
    assert response.status_code == 200
    assert (store.get(item)["content"], store.get(item)["version"]) == ("B 写的内容", 3)


def test_take_theirs_is_the_row_as_stored(alice_page, store):
    item = store.add(alice_page.user_id, "旧内容")
    changed_elsewhere(alice_page, item, content="A 改的内容")
    conflict = alice_page.htmx("PATCH", f"{ITEMS}/{item}", {"content": "B 写的内容"},
                               headers=if_match(1)).text
    (take,) = re.findall(r'hx-get="([^"]+)"[^>]*>用现在的<', conflict)
    row = alice_page.htmx("GET", html.unescape(take)).text
    assert "A 改的内容" in row and "B 写的内容" not in row


def test_an_edit_of_a_memory_dismissed_elsewhere_says_so_beside_both_wordings(alice_page, store):
    item = store.add(alice_page.user_id, "旧内容")
    changed_elsewhere(alice_page, item, status="DISMISSED")
    text = alice_page.htmx("PATCH", f"{ITEMS}/{item}", {"content": "B 写的内容"},
                           headers=if_match(1)).text
    assert "已在别处改动并忽略" in text
    assert "(已忽略)" in text
    assert store.get(item)["status"] == "DISMISSED"


def test_a_refused_edit_comes_back_for_the_version_it_was_opened_on(alice_page, store):
    """Fixing the words of a refused save must not turn it into an overwrite of a change made
    meanwhile."""
    item = store.add(alice_page.user_id, "旧内容")
    changed_elsewhere(alice_page, item, content="A 改的内容")
    response = alice_page.htmx("PATCH", f"{ITEMS}/{item}", {"content": " "}, headers=if_match(1))
    assert response.status_code == 400
    assert sent_if_match(response.text) == ['"1"']


@pytest.mark.parametrize(("new_status", "action"), [("DISMISSED", "忽略"), ("ACTIVE", "恢复")])
def test_a_status_change_from_a_row_out_of_date_says_what_changed_and_does_nothing(
        alice_page, store, new_status, action):
    status = "ACTIVE" if new_status == "DISMISSED" else "DISMISSED"
    item = store.add(alice_page.user_id, "旧内容", status=status)
    changed_elsewhere(alice_page, item, content="A 改的内容")
    response = alice_page.htmx(
        "PATCH", f"{ITEMS}/{item}/status",
        {"new_status": new_status, "shown_status": status, "shown_words": words("旧内容")},
        headers=if_match(1))
    assert response.status_code == 412
    assert f"这条记忆内容已在别处改成了下面这样,所以这次的「{action}」没有执行" in response.text
    assert "A 改的内容" in response.text
    assert sent_if_match(response.text) == ['"2"']
    assert store.get(item)["status"] == status


def test_a_dismiss_from_a_row_dismissed_elsewhere_says_so(alice_page, store):
    item = store.add(alice_page.user_id, "旧内容")
    changed_elsewhere(alice_page, item, status="DISMISSED")
    response = alice_page.htmx(
        "PATCH", f"{ITEMS}/{item}/status",
        {"new_status": "DISMISSED", "shown_status": "ACTIVE", "shown_words": words("旧内容")},
        headers=if_match(1))
    assert response.status_code == 412
    assert "这条记忆已在别处被忽略,所以这次的「忽略」没有执行" in response.text


def test_a_delete_from_a_row_out_of_date_keeps_the_memory_and_says_what_changed(
        alice_page, store):
    item = store.add(alice_page.user_id, "旧内容")
    changed_elsewhere(alice_page, item, content="A 改的内容", status="DISMISSED")
    response = alice_page.client.delete(
        f"{ITEMS}/{item}?shown_status=ACTIVE&shown_words={words('旧内容')}",
        headers={"HX-Request": "true", "X-CSRF-Token": alice_page.csrf, **if_match(1)})
    assert response.status_code == 412
    assert ("这条记忆已在别处被忽略,内容已在别处改成了下面这样,所以这次的「删除」没有执行"
            in response.text)
    assert store.get(item) is not None


def test_a_delete_from_the_current_version_deletes(alice_page, store):
    item = store.add(alice_page.user_id, "旧内容")
    response = alice_page.client.delete(
        f"{ITEMS}/{item}", headers={"HX-Request": "true", "X-CSRF-Token": alice_page.csrf,
                                    **if_match(1)})
    assert response.status_code == 200
    assert store.get(item) is None


@pytest.mark.parametrize(("path", "sentence"), [
    ("{}/edit", "这条记忆已在别处改过:下面是现在保存的内容。"),
    ("{}/delete", "这条记忆已在别处改过:要删除的是下面现在的内容。")])
def test_an_edit_or_delete_opened_from_a_row_out_of_date_says_it_shows_the_memory_as_now(
        alice_page, store, path, sentence):
    item = store.add(alice_page.user_id, "旧内容")
    changed_elsewhere(alice_page, item, content="A 改的内容")
    url = f"{ITEMS}/{path.format(item)}"
    opened = alice_page.htmx("GET", url, headers=if_match(1)).text
    assert sentence in opened and "A 改的内容" in opened
    assert sentence not in alice_page.htmx("GET", url, headers=if_match(2)).text
