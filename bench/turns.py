"""The 1,000 conversation turns both memory systems are fed (stdlib only: mem0 imports it)."""

from __future__ import annotations

USERS = 5
TURNS = 1_000


def turns() -> list[tuple[int, str, str]]:
    """(user number 0..4, user message, assistant answer); 200 turns per user."""
    return [(i % USERS,
             f"第 {i} 轮:以后报告都用中文写,我们仓库用 pnpm,测试框架是 Vitest,部署前先跑 lint",
             f"好的,第 {i} 轮的报告已用中文完成,并用 pnpm 跑过 Vitest 测试。")
            for i in range(TURNS)]
