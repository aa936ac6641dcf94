"""Why does it remember this? 来源与历史, search and project, the agent's view and 访问记录 on
我的记忆, and the auditor's content search and history — in Chromium, on desktop and phone.

The screenshots (`test-artifacts/provenance-*.png`) are what docs/screenshots/provenance-* are.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from flask import Flask
from playwright.sync_api import Page, expect

from app.memory import audit, service
from app.memory.repository import Filters
from app.paging import PageRequest
from tests.browser.checks import check_targets_and_contrast as _check
from tests.browser.conftest import ON_BOTH_SCREENS, hand_session_to
from tests.conftest import Accounts
from tests.page_support import Store


def _learnt(store: Store, user_id: int) -> int:
    """输出报告用中文, learnt in session #123 of mao, re-confirmed twice, then edited."""
    store.session(user_id, "mao", 123)
    item_id = store.add(user_id, "输出报告一律用中文", source="AUTO")
    store.journal(user_id, item_id,
                  {"type": "CREATED", "actor": "EXTRACTION", "session_id": 123,
                   "after": "输出报告用中文"},
                  {"type": "TOUCHED", "actor": "EXTRACTION", "session_id": 130},
                  {"type": "TOUCHED", "actor": "EXTRACTION", "session_id": 141},
                  {"type": "EDITED", "actor": "USER", "before": "输出报告用中文",
                   "after": "输出报告一律用中文"})
    return item_id


@ON_BOTH_SCREENS
def test_history_panel_tells_where_a_memory_came_from(page: Page, alice_id: int, store: Store,
                                                     shot: Callable[[str], None]):
    store.add_many(alice_id, ["回答请用中文", "先给结论"])
    item_id = _learnt(store, alice_id)
    merged = store.add(alice_id, "代码示例用 TypeScript,注释用英文", source="CONSOLIDATED")
    store.journal(alice_id, merged, {
        "type": "CONSOLIDATED", "actor": "CONSOLIDATION",
        "before": json.dumps(["代码示例用 TypeScript", "注释用英文"], ensure_ascii=False),
        "after": "代码示例用 TypeScript,注释用英文"})
    page.goto("/settings/memory")
    row = page.locator(f"#memory-{item_id}")
    history = row.locator("details.history")
    row.get_by_text("来源与历史").click()
    expect(history).to_contain_text("从会话 #123(项目 mao)学到")
    expect(history).to_contain_text("又确认过 2 次")
    expect(history).to_contain_text("输出报告用中文 → 输出报告一律用中文")
    expect(history.locator("time").first).not_to_contain_text("UTC")
    _check(page)
    shot("provenance-history")
    page.locator(f"#memory-{merged}").get_by_text("来源与历史").click()
    expect(page.locator(f"#memory-{merged} .merged li")).to_have_text(
        ["代码示例用 TypeScript", "注释用英文"])
    # Closed and opened again it stays as loaded; the keyboard opens it too.
    summary = row.locator("summary")
    summary.press("Enter")
    expect(history).not_to_have_attribute("open", "")
    summary.press("Enter")
    expect(history).to_contain_text("从会话 #123")


def test_history_after_an_edit_includes_that_edit(page: Page, alice_id: int, store: Store):
    item_id = store.add(alice_id, "测试用 Jest")
    page.goto("/settings/memory")
    row = page.locator(f"#memory-{item_id}")
    row.get_by_role("button", name="编辑", exact=True).click()
    row.get_by_label("编辑内容").fill("测试用 Vitest")
    row.get_by_role("button", name="保存", exact=True).click()
    expect(row.locator(".memory-content")).to_have_text("测试用 Vitest")
    row.get_by_text("来源与历史").click()
    expect(row.locator("details.history")).to_contain_text("测试用 Jest → 测试用 Vitest")


@ON_BOTH_SCREENS
def test_search_as_you_type_narrows_the_list_and_keeps_it_in_the_url(
        page: Page, alice_id: int, store: Store, shot: Callable[[str], None]):
    store.add_many(alice_id, ["这个项目用 pnpm", "回答请用中文", "pnpm 的缓存放在 ~/.pnpm-store",
                              "100% 的覆盖率不是目标"])
    page.goto("/settings/memory")
    search = page.get_by_role("searchbox", name="搜索记忆")
    search.press_sequentially("pnpm", delay=40)
    expect(page).to_have_url(re.compile(r"\?q=pnpm$"))
    expect(page.locator("li.memory-row")).to_have_count(2)
    expect(page.get_by_text("共 2 条")).to_be_visible()
    expect(search).to_be_focused()
    shot("provenance-search")
    page.reload()
    expect(page.get_by_role("searchbox", name="搜索记忆")).to_have_value("pnpm")
    expect(page.locator("li.memory-row")).to_have_count(2)
    page.get_by_role("searchbox", name="搜索记忆").fill("100%")
    expect(page.locator("li.memory-row")).to_have_count(1)
    page.get_by_role("searchbox", name="搜索记忆").fill("没有这样的")
    expect(page.get_by_text("没有符合条件的记忆")).to_be_visible()
    page.get_by_role("link", name="清除搜索和项目筛选").click()
    expect(page.locator("li.memory-row")).to_have_count(4)


def test_project_select_under_project_narrows_to_one_project(page: Page, alice_id: int,
                                                            store: Store):
    store.add(alice_id, "这个项目用 pnpm", scope="PROJECT", project_key="mao")
    store.add(alice_id, "部署到 fly.io", scope="PROJECT", project_key="zeta")
    store.add(alice_id, "回答请用中文")
    page.goto("/settings/memory")
    page.get_by_role("link", name="项目", exact=True).click()
    expect(page.locator("li.memory-row")).to_have_count(2)
    page.get_by_label("项目", exact=True).focus()
    page.get_by_label("项目", exact=True).select_option("zeta")
    expect(page).to_have_url(re.compile(r"scope=PROJECT&project=zeta"))
    expect(page.locator("li.memory-row")).to_have_count(1)
    expect(page.locator("li.memory-row")).to_contain_text("部署到 fly.io")
    expect(page.get_by_label("项目", exact=True)).to_be_focused()
    page.get_by_role("link", name="全部", exact=True).click()
    expect(page.locator("li.memory-row")).to_have_count(3)


@ON_BOTH_SCREENS
def test_agents_view_shows_the_exact_block_for_the_chosen_project(
        page: Page, app: Flask, alice_id: int, store: Store, shot: Callable[[str], None]):
    store.add(alice_id, "回答请用中文")
    store.add(alice_id, "这个项目用 pnpm", scope="PROJECT", project_key="mao")
    store.add(alice_id, "不再需要的", status="DISMISSED")
    page.goto("/settings/memory")
    page.get_by_text("新会话中 Agent 会看到").click()
    block = page.locator("#preview-body pre")
    with app.app_context():
        outside = json.loads(service.context_json(alice_id, None))["prompt"]
        in_mao = json.loads(service.context_json(alice_id, "mao"))["prompt"]
    expect(block).to_have_text(outside)
    page.get_by_label("会话所在项目").select_option("mao")
    expect(block).to_have_text(in_mao)
    expect(page.locator("#preview-body")).to_contain_text("Agent 会看到 2 条记忆")
    assert "不再需要的" not in block.inner_text()
    _check(page)
    page.locator("#agent-view").scroll_into_view_if_needed()
    shot("provenance-agent-view")


@ON_BOTH_SCREENS
def test_access_log_shows_who_read_my_memories(page: Page, app: Flask, alice_id: int,
                                               users: Accounts, store: Store,
                                               shot: Callable[[str], None]):
    auditor = users.user("auditor", grants=("memory:read",))
    item_id = store.add(alice_id, "回答请用中文")
    with app.app_context():
        audit.memories(auditor, alice_id, Filters(), PageRequest(1, 20))
        audit.history(auditor, item_id)
    page.goto("/settings/memory")
    page.get_by_text("访问记录", exact=True).click()
    log = page.locator("#access-log-body")
    expect(log).to_contain_text("共 2 次")
    expect(log.locator("li").first).to_contain_text(
        "auditor 查看了记忆「回答请用中文」的来源与历史")
    expect(log.locator("li").nth(1)).to_contain_text("auditor 查看了你的记忆列表")
    _check(page)
    page.locator("#access-log").scroll_into_view_if_needed()
    shot("provenance-access-log")


@ON_BOTH_SCREENS
def test_auditor_searches_content_and_reads_a_history_that_the_user_then_sees(
        page: Page, app: Flask, live_server: str, users: Accounts, store: Store,
        shot: Callable[[str], None]):
    alice = users.user("alice")
    users.user("auditor", grants=("memory:read",))
    _learnt(store, alice)
    store.add_many(alice, ["回答请用中文", "先给结论"])
    hand_session_to(page, app, live_server, "auditor")
    page.goto(f"/admin/memory?q=alice&userId={alice}")
    expect(page.get_by_text("共 3 条")).to_be_visible()
    search = page.get_by_role("searchbox", name="搜索内容")
    search.press_sequentially("报告", delay=40)
    expect(page).to_have_url(re.compile(r"text=%E6%8A%A5%E5%91%8A"))
    expect(page.locator("table.audit tbody tr")).to_have_count(1)
    expect(search).to_have_value("报告")
    page.get_by_text("来源与历史").click()
    history = page.locator("table.audit details.history")
    expect(history).to_contain_text("从会话 #123(项目 mao)学到")
    expect(history).to_contain_text("用户修改了内容")
    _check(page)
    shot("provenance-audit")
    hand_session_to(page, app, live_server, "alice")
    page.goto("/settings/memory")
    page.get_by_text("访问记录", exact=True).click()
    expect(page.locator("#access-log-body li").first).to_contain_text(
        "auditor 查看了记忆「输出报告一律用中文」的来源与历史")
