"""What a job changes is in the very next context read, even with the block cached before it
(issue 12: the cache is invalidated through the domain's one write path, jobs included)."""

from __future__ import annotations

import pytest

from app.db_types import utcnow
from tests.completions import USER_ID
from tests.conftest import assert_ok

EARLIER = utcnow().replace(year=2025)


@pytest.fixture
def read(as_service):
    platform = as_service()

    def contents() -> list[str]:
        data = assert_ok(platform.get(
            f"/api/v1/internal/memory/context?userId={USER_ID}&projectKey=mao"))
        return [m["content"] for m in data["memories"]]

    return contents


def test_an_extraction_is_in_the_next_read(extract, memories, read):
    reworded = memories.add(USER_ID, "报告用中文", source="AUTO")
    assert read() == ["报告用中文"]
    extract([{"type": "user", "action": "update", "existingId": reworded,
              "content": "所有报告都用中文写"},
             {"type": "project", "content": "测试用 Vitest"}])
    assert read() == ["测试用 Vitest", "所有报告都用中文写"]


def test_a_d14_demotion_is_in_the_next_read(extract, memories, read):
    memories.bulk(USER_ID, [f"自动行{i:03d}" for i in range(200)], source="AUTO",
                  updated_at=EARLIER)
    assert read()[0] == "自动行199"
    assert extract([{"type": "user", "content": "池满时学到的新事实"}])["demoted"] == 1
    assert read()[:2] == ["池满时学到的新事实", "自动行199"]


def test_a_consolidation_is_in_the_next_read(consolidate, memories, read):
    a, b = memories.bulk(USER_ID, ["报告用中文", "总结用中文"], source="AUTO", updated_at=EARLIER)
    assert read() == ["总结用中文", "报告用中文"]
    consolidate([{"op": "merge", "sourceIds": [a, b], "content": "报告和总结都用中文"}])
    assert read() == ["报告和总结都用中文"]
