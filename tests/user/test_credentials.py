"""Credentials are never stored (SPEC §11): by hand, through the JSON API and the page, content
holding one is refused with 400/3038 and a message naming the kind; nothing is stored."""

from __future__ import annotations

import pytest

from tests.conftest import assert_error, assert_ok

URL = "/api/v1/memory"
GITHUB_TOKEN = "ghp_" + "a1B2c3D4e5F6" * 3
CREDENTIALS = [
    ("GitHub token: " + GITHUB_TOKEN, "疑似 GitHub 令牌"),
    ("我的数据库密码是 S3cr3t!2024", "疑似密码或密钥"),
    ("生产库 mysql://deploy:S3cr3t@db.internal/app", "疑似带密码的连接地址"),
    ("信用卡 4111 1111 1111 1111", "疑似银行卡号"),
    ("身份证号 11010519491231002X", "疑似身份证号"),
]


@pytest.mark.parametrize(("content", "words"), CREDENTIALS)
def test_creating_a_memory_that_holds_a_credential_is_3038_naming_the_kind(alice, memories,
                                                                          content, words):
    body = assert_error(alice.post(URL, {"scope": "USER", "content": content}), 400, 3038)
    assert words in body["message"]
    assert memories.count(alice.user_id) == 0


def test_a_project_memory_that_holds_a_credential_is_refused_too(alice, memories):
    result = alice.post(URL, {"scope": "PROJECT", "projectKey": "mao",
                              "content": "部署用 " + GITHUB_TOKEN})
    assert_error(result, 400, 3038)
    assert memories.count(alice.user_id) == 0


@pytest.mark.parametrize(("content", "words"), CREDENTIALS)
def test_editing_a_memory_to_hold_a_credential_is_3038_and_changes_nothing(alice, content,
                                                                          words):
    item = assert_ok(alice.post(URL, {"scope": "USER", "content": "部署走 GitHub Actions"}), 201)
    body = assert_error(alice.patch(f"{URL}/{item['id']}", {"content": content}), 400, 3038)
    assert words in body["message"]
    after = assert_ok(alice.get(f"{URL}/{item['id']}/history"))
    assert [event["type"] for event in after] == ["CREATED"]
    [row] = assert_ok(alice.get(URL))["records"]
    assert (row["content"], row["version"]) == ("部署走 GitHub Actions", item["version"])


def test_ordinary_technical_text_is_stored(alice):
    for content in ("密码策略至少 12 位", "回滚到 a94a8fe5ccb19ba61c4c0873d391e987982fbbd3",
                    "镜像 registry.example.com/app/api:1.4.2"):
        assert_ok(alice.post(URL, {"scope": "USER", "content": content}), 201)


# ---- the page ---------------------------------------------------------------------------

def test_the_page_refuses_a_credential_in_the_add_dialog_naming_the_kind(alice_page, store):
    response = alice_page.htmx("POST", "/settings/memory/items",
                               {"scope": "USER", "content": "GitHub token: " + GITHUB_TOKEN})
    assert response.status_code == 400
    assert "内容疑似 GitHub 令牌:密码、密钥、令牌等凭据不能存为记忆,请删掉它后再保存。" in \
        response.text
    assert GITHUB_TOKEN not in response.text
    assert store.of(alice_page.user_id) == []


def test_the_page_refuses_a_credential_in_an_edit_inline_keeping_the_typed_text(alice_page,
                                                                               store):
    item = store.add(alice_page.user_id, "旧内容")
    response = alice_page.htmx("PATCH", f"/settings/memory/items/{item}",
                               {"content": "口令:Tr0ub4dor&3"})
    assert response.status_code == 400
    assert "内容疑似密码或密钥:" in response.text
    assert "口令:Tr0ub4dor&amp;3</textarea>" in response.text
    assert store.get(item)["content"] == "旧内容"
