"""我的记忆 answers "why does it remember this?": 来源与历史, search and project, the agent's
view and 访问记录 (SPEC §8), each through the same domain code as the JSON API."""

from __future__ import annotations

import html as html_lib
import json
import re

import pytest
from flask import Flask

from app.memory import access_log, audit, service
from app.memory.repository import Filters
from app.paging import PageRequest
from tests.page_support import PageSession, Store


def _ids(html: str) -> list[int]:
    return [int(i) for i in re.findall(r'<li class="memory-row[^"]*" id="memory-(\d+)"', html)]


def _history(page: PageSession, item_id: int) -> str:
    response = page.htmx("GET", f"/settings/memory/items/{item_id}/history")
    assert response.status_code == 200, response.text
    return response.text


def _text(html: str) -> str:
    """What a person reads: tags dropped, whitespace collapsed."""
    return re.sub(r"\s+", " ", html_lib.unescape(re.sub(r"<[^>]+>", "", html))).strip()


def _create(page: PageSession, content: str, scope: str = "USER", project_key: str = "") -> int:
    response = page.htmx("POST", "/settings/memory/items",
                         {"scope": scope, "content": content, "projectKey": project_key})
    assert response.status_code == 201, response.text
    return int(re.search(r'id="memory-(\d+)"', page.get("/settings/memory").text).group(1))


# ---- 来源与历史 ------------------------------------------------------------------------------

def test_every_row_offers_its_history_loaded_on_demand(alice_page, store):
    item_id = store.add(alice_page.user_id, "输出报告用中文")
    html = alice_page.get("/settings/memory").text
    assert re.search(f'hx-get="/settings/memory/items/{item_id}/history"\\s+'
                     'hx-trigger="toggle once"', html)
    assert "<summary" in html and "来源与历史</summary>" in html


def test_a_hand_written_memory_says_it_was_added_by_hand(alice_page):
    item_id = _create(alice_page, "输出报告用中文")
    assert "你在 " in _text(_history(alice_page, item_id))
    assert "手动添加" in _text(_history(alice_page, item_id))


def test_a_learnt_memory_names_its_session_project_and_confirmations(alice_page, store):
    uid = alice_page.user_id
    store.session(uid, "mao", 123)
    item_id = store.add(uid, "输出报告用中文", source="AUTO")
    store.journal(uid, item_id,
                  {"type": "CREATED", "actor": "EXTRACTION", "session_id": 123,
                   "after": "输出报告用中文"},
                  {"type": "TOUCHED", "actor": "EXTRACTION", "session_id": 124},
                  {"type": "TOUCHED", "actor": "EXTRACTION", "session_id": 125})
    told = _text(_history(alice_page, item_id))
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC 从会话 #123\(项目 mao\)学到", told)
    assert re.search(r"又确认过 2 次,最近一次在 \d{4}-\d\d-\d\d", told)


def test_an_edit_shows_the_words_before_and_after(alice_page):
    item_id = _create(alice_page, "输出报告用中文")
    alice_page.htmx("PATCH", f"/settings/memory/items/{item_id}", {"content": "报告一律用中文"})
    told = _text(_history(alice_page, item_id))
    assert "你修改了内容: 输出报告用中文 → 报告一律用中文" in told


def test_dismiss_and_restore_are_told_in_order(alice_page):
    item_id = _create(alice_page, "输出报告用中文")
    for status in ("DISMISSED", "ACTIVE"):
        alice_page.htmx("PATCH", f"/settings/memory/items/{item_id}/status",
                        {"new_status": status})
    told = _text(_history(alice_page, item_id))
    assert told.index("你忽略了它") < told.index("你恢复了它")


def test_a_merged_memory_lists_what_it_was_merged_from(alice_page, store):
    uid = alice_page.user_id
    item_id = store.add(uid, "报告用中文,代码注释用英文", source="CONSOLIDATED")
    store.journal(uid, item_id, {"type": "CONSOLIDATED", "actor": "CONSOLIDATION",
                                 "before": json.dumps(["报告用中文", "<b>注释</b>用英文"],
                                                      ensure_ascii=False),
                                 "after": "报告用中文,代码注释用英文"})
    html = _history(alice_page, item_id)
    assert "由 2 条相近的记忆合并而成" in _text(html)
    assert "<li>报告用中文</li>" in html
    assert "<li>&lt;b&gt;注释&lt;/b&gt;用英文</li>" in html


def test_a_demotion_says_why_and_that_it_can_be_restored(alice_page, store):
    uid = alice_page.user_id
    item_id = store.add(uid, "旧的自动记忆", source="AUTO", status="DISMISSED")
    store.journal(uid, item_id,
                  {"type": "CREATED", "actor": "EXTRACTION", "session_id": 7,
                   "after": "旧的自动记忆"},
                  {"type": "DEMOTED", "actor": "EXTRACTION", "session_id": 8})
    told = _text(_history(alice_page, item_id))
    assert "记忆已满 200 条" in told and "可以恢复" in told


def test_a_memory_from_before_the_journal_says_so(alice_page, store):
    item_id = store.add(alice_page.user_id, "很早以前的记忆", source="AUTO")
    told = _text(_history(alice_page, item_id))
    assert "Agent 自动收集的记忆" in told and "没有更早的历史" in told


def test_another_users_history_is_not_found(alice_page, users, store):
    bobs = store.add(users.user("bob"), "bob 的记忆")
    response = alice_page.htmx("GET", f"/settings/memory/items/{bobs}/history")
    assert response.status_code == 404
    assert "bob 的记忆" not in response.text


# ---- search and project ---------------------------------------------------------------------

def test_search_narrows_the_list_and_stays_in_the_url(alice_page, store):
    uid = alice_page.user_id
    pnpm, _ = store.add_many(uid, ["we use PNPM here", "报告用中文"])
    html = alice_page.get("/settings/memory?q=pnpm").text
    assert _ids(html) == [pnpm]
    assert 'id="memory-q" name="q" type="search" value="pnpm"' in html
    assert 'href="/settings/memory?scope=USER&amp;q=pnpm"' in html


@pytest.mark.parametrize("typed", ["100%", "a_b"])
def test_search_matches_wildcards_literally(alice_page, store, typed):
    uid = alice_page.user_id
    literal, _ = store.add_many(uid, [f"coverage {typed}", "coverage 1000 aXb"])
    html = alice_page.htmx("GET", f"/settings/memory?q={typed.replace('%', '%25')}").text
    assert _ids(html) == [literal]


def test_a_search_that_finds_nothing_offers_to_clear_it(alice_page, store):
    store.add(alice_page.user_id, "报告用中文")
    html = alice_page.htmx("GET", "/settings/memory?q=pnpm").text
    assert "没有内容包含「pnpm」的生效中记忆" in _text(html)
    assert 'href="/settings/memory" hx-get="/settings/memory"' in html


def test_project_tab_offers_the_users_own_projects_and_filters_by_one(alice_page, store):
    uid = alice_page.user_id
    mao = store.add(uid, "mao 用 pnpm", scope="PROJECT", project_key="mao")
    store.add(uid, "zen 用 yarn", scope="PROJECT", project_key="zen")
    html = alice_page.get("/settings/memory?scope=PROJECT&project=mao").text
    assert _ids(html) == [mao]
    select = html[html.index('id="memory-project"'):html.index("</select>")]
    assert re.findall(r'<option value="([^"]*)"', select) == ["", "mao", "zen"]
    assert '<option value="mao" selected>' in select


def test_a_project_outside_the_project_tab_narrows_nothing(alice_page, store):
    uid = alice_page.user_id
    store.add(uid, "mao 用 pnpm", scope="PROJECT", project_key="mao")
    store.add(uid, "报告用中文")
    assert len(_ids(alice_page.get("/settings/memory?project=mao").text)) == 2


def test_a_project_with_a_control_character_is_refused(alice_page):
    response = alice_page.get("/settings/memory?scope=PROJECT&project=ma%01o")
    assert response.status_code == 400


def test_row_actions_keep_the_search_on_screen(alice_page, store):
    item_id = store.add(alice_page.user_id, "we use pnpm")
    html = alice_page.get("/settings/memory?q=pnpm").text
    view = html[html.index('id="memory-view"'):]
    assert '<input type="hidden" name="q" value="pnpm">' in view[:view.index("</form>")]
    assert item_id in _ids(html)


# ---- the agent's view -----------------------------------------------------------------------

def test_the_agents_view_is_the_context_block_byte_for_byte(app: Flask, alice_page, store):
    uid = alice_page.user_id
    store.add(uid, "报告用中文 <b>&</b>")
    store.add(uid, "mao 用 pnpm", scope="PROJECT", project_key="mao")
    html = alice_page.htmx("GET", "/settings/memory/preview?projectKey=mao").text
    shown = html_lib.unescape(re.search(r'<pre class="prompt"[^>]*>(.*?)</pre>', html, re.S)[1])
    with app.app_context():
        context = json.loads(service.context_json(uid, "mao"))
    assert shown == context["prompt"]
    assert "Agent 会看到 2 条记忆" in _text(html)


def test_the_agents_view_offers_the_users_projects(alice_page, store):
    store.add(alice_page.user_id, "mao 用 pnpm", scope="PROJECT", project_key="mao")
    html = alice_page.get("/settings/memory").text
    select = html[html.index('id="preview-project"'):]
    assert re.findall(r'<option value="([^"]*)"', select[:select.index("</select>")]) == ["", "mao"]


def test_the_agents_view_without_memories_says_it_sees_none(alice_page):
    html = alice_page.htmx("GET", "/settings/memory/preview").text
    assert "Agent 不会看到任何记忆" in _text(html)


# ---- 访问记录 -------------------------------------------------------------------------------

def test_an_audit_read_appears_in_my_access_log_and_nobody_elses(app: Flask, alice_page, users,
                                                                  store: Store):
    auditor = users.user("auditor", grants=("memory:read",))
    bob = users.user("bob")
    item_id = store.add(alice_page.user_id, "报告用中文")
    with app.app_context():
        audit.memories(auditor, alice_page.user_id, Filters(), PageRequest(1, 20))
        audit.history(auditor, item_id)
    told = _text(alice_page.htmx("GET", "/settings/memory/access-log").text)
    assert "共 2 次" in told
    assert told.index("auditor 查看了记忆「报告用中文」的来源与历史") < told.index(
        "auditor 查看了你的记忆列表")
    with app.app_context():
        assert access_log.page(PageRequest(1, 10), bob).total == 0


def test_an_access_log_without_reads_says_nobody_read_them(alice_page):
    assert "还没有人以审计身份查看过你的记忆" in alice_page.htmx(
        "GET", "/settings/memory/access-log").text


def test_the_agents_view_of_a_bot_key_is_the_view_outside_projects(alice_page, store):
    store.add(alice_page.user_id, "回答请用中文")
    html = alice_page.htmx("GET", "/settings/memory/preview?projectKey=weixin-bot").text
    assert "不在项目中的会话里,Agent 会看到 1 条记忆" in _text(html)
