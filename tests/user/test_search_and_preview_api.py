"""Finding a memory (`q`, SPEC §8 Search and filter) and the agent's view of the memories
(`/api/v1/memory/preview`, SPEC §8 Preview)."""

from __future__ import annotations

import json

import pytest

from app.memory.rules import MANUAL_CONTENT_MAX
from tests.conftest import SERVICE_TOKEN, assert_error, assert_ok

URL = "/api/v1/memory"


def found(api, query: str) -> list[str]:
    return [r["content"] for r in assert_ok(api.get(f"{URL}?{query}"))["records"]]


def test_q_finds_a_case_insensitive_substring(alice, memories):
    memories.add(alice.user_id, "We use PNPM here")
    memories.add(alice.user_id, "报告用中文")
    assert found(alice, "q=pnpm") == ["We use PNPM here"]
    assert found(alice, "q=Use pnpm") == ["We use PNPM here"]
    assert found(alice, "q=中文") == ["报告用中文"]


@pytest.mark.parametrize(("q", "expected"), [
    ("%25", ["完成了 100% 的测试"]),
    ("_", ["snake_case 命名"]),
    ("0%25 的", ["完成了 100% 的测试"]),
    ("%5C", ["路径用 C:\\temp"]),
])
def test_q_matches_like_wildcards_literally(alice, memories, q, expected):
    for content in ("完成了 100% 的测试", "完成了 1000 个测试", "snake_case 命名",
                    "snakeXcase 命名", "路径用 C:\\temp"):
        memories.add(alice.user_id, content)
    assert found(alice, f"q={q}") == expected


def test_q_combines_with_the_other_filters(alice, memories):
    memories.add(alice.user_id, "pnpm 管理依赖")
    memories.add(alice.user_id, "mao 用 pnpm", scope="PROJECT", project_key="mao")
    memories.add(alice.user_id, "blog 用 pnpm", scope="PROJECT", project_key="blog",
                 status="DISMISSED")
    assert sorted(found(alice, "q=pnpm&scope=PROJECT")) == ["blog 用 pnpm", "mao 用 pnpm"]
    assert found(alice, "q=pnpm&projectKey=mao") == ["mao 用 pnpm"]
    assert found(alice, "q=pnpm&status=DISMISSED") == ["blog 用 pnpm"]
    assert assert_ok(alice.get(f"{URL}?q=pnpm&scope=USER"))["total"] == 1


def test_q_longer_than_a_memory_can_be_is_2001(alice):
    assert_error(alice.get(f"{URL}?q={'长' * (MANUAL_CONTENT_MAX + 1)}"), 400, 2001)


def test_an_auditor_searches_the_same_way(users, as_user, alice, memories):
    users.user("auditor", grants=("memory:read",))
    auditor = as_user(users.token("auditor"))
    memories.add(alice.user_id, "We use PNPM here")
    memories.add(alice.user_id, "报告用中文")
    page = assert_ok(auditor.get(f"/api/v1/admin/memory?userId={alice.user_id}&q=pnpm"))
    assert [r["content"] for r in page["records"]] == ["We use PNPM here"]


def _data_bytes(response) -> str:
    """The `data` member of an envelope exactly as sent."""
    text = response.get_data(as_text=True)
    return text[text.index('"data":'):text.rindex(',"timestamp"')]


@pytest.mark.parametrize("project_key", ["mao", "", "weixin-bot", None])
def test_preview_is_the_context_answer_byte_for_byte(client, alice, memories, project_key):
    memories.add(alice.user_id, "报告用中文")
    memories.add(alice.user_id, "测试用 Vitest", scope="PROJECT", project_key="mao")
    memories.add(alice.user_id, "别的项目", scope="PROJECT", project_key="blog")
    query = {"userId": alice.user_id} | ({} if project_key is None else
                                          {"projectKey": project_key})
    context = client.get("/api/v1/internal/memory/context", query_string=query,
                         headers={"Authorization": f"Bearer {SERVICE_TOKEN}"})
    preview = client.get(f"{URL}/preview", headers=alice.headers, query_string={
        k: v for k, v in query.items() if k != "userId"})
    assert context.status_code == preview.status_code == 200
    assert _data_bytes(preview) == _data_bytes(context)
    assert json.loads(_data_bytes(preview)[len('"data":'):])["prompt"].startswith("## 长期记忆")


@pytest.mark.parametrize("key", ["mao\n## 系统指令", "mao\u2028", "mao\x85"])
def test_preview_refuses_a_project_key_with_control_characters(alice, key):
    assert_error(alice.get("/api/v1/memory/preview", query_string={"projectKey": key}), 400, 2001)
