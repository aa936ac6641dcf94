"""The two pages people look at most, with a realistic number of memories, on desktop and phone.

The screenshots (`test-artifacts/showcase-*.png`) are what docs/screenshots/ is made from.
"""

from __future__ import annotations

from collections.abc import Callable

from flask import Flask
from playwright.sync_api import Page, expect

from tests.browser.conftest import ON_BOTH_SCREENS, hand_session_to
from tests.conftest import Accounts
from tests.page_support import Store

USER_MEMORIES = [
    ("回答请用中文,技术名词保留英文", "MANUAL"),
    ("先给结论,再给理由,不要客套话", "CONSOLIDATED"),
    ("代码示例默认用 TypeScript", "AUTO"),
    ("时间一律写成北京时间", "MANUAL"),
    ("提交信息用英文祈使句", "AUTO"),
    ("不喜欢表情符号", "AUTO"),
    ("周报每周五下午发给我", "MANUAL"),
    ("解释算法时附上复杂度", "AUTO"),
    ("表格优先于长段落", "CONSOLIDATED"),
]
PROJECT_MEMORIES = {
    "mao": ["这个项目用 pnpm,不要用 npm", "测试用 Vitest,提交前先跑 pnpm test",
            "组件放在 packages/ui 下", "API 客户端由 openapi 生成,不要手改",
            "发布分支是 release/*", "日志用 pino,不要 console.log", "CI 在 GitHub Actions 上跑",
            "数据库迁移用 drizzle-kit"],
    "zeta": ["Python 3.12,依赖用 uv 管理", "格式化用 ruff format", "接口文档在 docs/api.md",
             "部署到 fly.io", "测试数据库是 SQLite 内存库", "配置读取 ZETA_ 开头的环境变量"],
    "docs-site": ["文档站用 VitePress", "中文文档放在 zh/ 目录", "图片压缩后再提交",
                  "每页开头写一句摘要", "链接检查在 CI 里跑"],
    "infra": ["Terraform 状态存在 S3", "改动生产前先在 staging 演练", "告警发到飞书群",
              "节点用 ARM 机型", "密钥只放在 Vault"],
}


def showcase(store: Store, user_id: int) -> int:
    """33 memories: the user scope and 4 projects, every source, one per project dismissed."""
    count = 0
    for content, source in USER_MEMORIES:
        store.add(user_id, content, source=source)
        count += 1
    for session_id, (key, contents) in enumerate(PROJECT_MEMORIES.items(), start=1):
        store.session(user_id, key, session_id)
        for n, content in enumerate(contents):
            store.add(user_id, content, scope="PROJECT", project_key=key,
                         source=("AUTO", "MANUAL", "CONSOLIDATED")[n % 3],
                         status="DISMISSED" if n == 4 else "ACTIVE")
            count += 1
    return count


@ON_BOTH_SCREENS
def test_showcase_pages_fit_the_screen(page: Page, app: Flask, live_server: str, users: Accounts,
                                      store: Store, shot: Callable[[str], None]):
    alice = users.user("alice")
    assert showcase(store, alice) == 33
    users.user("auditor", grants=("memory:read",))
    width = page.viewport_size["width"]
    hand_session_to(page, app, live_server, "alice")
    page.goto("/settings/memory")
    expect(page.get_by_text("共 29 条")).to_be_visible()
    shot("showcase-memory")
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    hand_session_to(page, app, live_server, "auditor")
    page.goto(f"/admin/memory?q=alice&userId={alice}")
    expect(page.get_by_text("共 33 条")).to_be_visible()
    shot("showcase-audit")
    assert page.evaluate("document.documentElement.scrollWidth") <= width
