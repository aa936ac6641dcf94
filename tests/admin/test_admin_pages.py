"""记忆审计 reads any user's memories and changes none; 系统设置 picks the extraction model."""

from __future__ import annotations

import re

import pytest
from flask import Flask

from app.extensions import db
from app.system import service as system
from app.system.models import EXTRACTION_MODEL_KEY, SystemSetting

BANNER = "本页面用于审计用户记忆内容,仅供治理用途"


def _main(html: str) -> str:
    """The page without the shared header (whose logout form is the only POST anywhere)."""
    return html[html.index('<main'):]


def _setting_value(app: Flask, key: str = EXTRACTION_MODEL_KEY) -> str:
    with app.app_context():
        return db.session.get(SystemSetting, key).value


def _add_models(app: Flask) -> tuple[int, int]:
    with app.app_context():
        fast = system.add_model("fast", "gpt-4o-mini", default=True)
        big = system.add_model("big", "gpt-4o")
        return fast.id, big.id


# ---- who may open them -----------------------------------------------------------------

def test_audit_page_is_forbidden_without_memory_read(alice_page):
    response = alice_page.get("/admin/memory")
    assert response.status_code == 403
    assert "记忆审计需要 memory:read 权限" in response.text
    assert "本页面用于审计用户记忆内容" not in response.text


def test_audit_fragment_is_forbidden_without_memory_read(alice_page):
    response = alice_page.htmx("GET", "/admin/memory?userId=1")
    assert response.status_code == 403
    assert response.headers["HX-Retarget"] == "#toast"


@pytest.mark.parametrize("grants", [("memory:read",), ()])
def test_settings_page_is_for_admins_only(users, pages, grants):
    users.user("carol", grants=grants)
    pages.login("carol")
    assert pages.get("/admin/settings").status_code == 403
    response = pages.htmx("PUT", "/admin/settings/memory.extractionModelId", {"value": ""})
    assert response.status_code == 403


@pytest.mark.parametrize(("grants", "is_admin", "status"), [
    (("memory:read",), False, 200),
    ((), True, 200),
])
def test_audit_page_opens_for_memory_read_or_admin(users, pages, grants, is_admin, status):
    users.user("dave", grants=grants, admin=is_admin)
    pages.login("dave")
    assert pages.get("/admin/memory").status_code == status


def test_admin_pages_offer_no_route_that_writes_a_memory(app):
    methods = {rule.rule: rule.methods - {"HEAD", "OPTIONS"} for rule in app.url_map.iter_rules()
               if rule.endpoint.startswith("admin_pages.")}
    assert methods == {"/admin/memory": {"GET"},
                       "/admin/memory/items/<int:item_id>/history": {"GET"},
                       "/admin/settings": {"GET"}, "/admin/settings/<path:key>": {"PUT"}}


# ---- audit ------------------------------------------------------------------------------

def test_audit_page_shows_the_fixed_banner(auditor_page):
    html = auditor_page.get("/admin/memory").text
    assert f'<p class="banner" role="note">{BANNER}</p>' in html


def test_user_search_finds_by_name_and_by_id(auditor_page, users):
    alice = users.user("alice")
    users.user("bob")
    html = auditor_page.htmx("GET", "/admin/memory?q=ali").text
    assert ">alice</a>" in html and ">bob</a>" not in html
    assert f'href="/admin/memory?q=ali&amp;userId={alice}"' in html
    assert ">alice</a>" in auditor_page.htmx("GET", f"/admin/memory?q={alice}").text


def test_user_search_says_when_nothing_matches(auditor_page):
    assert "没有匹配「nobody」的用户" in auditor_page.htmx("GET", "/admin/memory?q=nobody").text


def test_audit_table_lists_the_chosen_users_memories_of_every_status(auditor_page, users, store):
    alice = users.user("alice")
    store.add(alice, "生效的", source="AUTO")
    store.add(alice, "忽略的", status="DISMISSED")
    store.add(users.user("bob"), "bob 的")
    html = auditor_page.htmx("GET", f"/admin/memory?userId={alice}").text
    assert "alice 的记忆" in html
    assert "生效的" in html and "忽略的" in html and "bob 的" not in html
    assert "共 2 条" in html


@pytest.mark.parametrize(("query", "shown", "hidden"), [
    ("status=DISMISSED", "忽略的", "生效的"),
    ("status=ACTIVE", "生效的", "忽略的"),
    ("scope=PROJECT", "项目的", "生效的"),
])
def test_audit_filters_by_scope_and_status(auditor_page, users, store, query, shown, hidden):
    alice = users.user("alice")
    store.add(alice, "生效的")
    store.add(alice, "忽略的", status="DISMISSED")
    store.add(alice, "项目的", scope="PROJECT", project_key="mao")
    html = auditor_page.htmx("GET", f"/admin/memory?userId={alice}&{query}").text
    assert shown in html and hidden not in html


def test_audit_table_pages_past_twenty_rows(auditor_page, users, store):
    alice = users.user("alice")
    store.add_many(alice, [f"第 {n} 条" for n in range(25)])
    html = auditor_page.htmx("GET", f"/admin/memory?userId={alice}").text
    assert "第 1 / 2 页" in html
    assert f'href="/admin/memory?userId={alice}&amp;page=2"' in html
    assert html.count("<tr>") == 20 + 1


def test_audit_page_has_no_control_that_writes(auditor_page, users, store):
    alice = users.user("alice")
    store.add(alice, "生效的")
    main = _main(auditor_page.get(f"/admin/memory?q=alice&userId={alice}").text)
    assert not re.search(r"hx-(post|put|patch|delete)", main)
    assert not re.search(r'method="post"', main, re.IGNORECASE)
    assert "<button" not in main.replace('<button type="submit">搜索</button>', "")


def test_audit_results_fragment_for_htmx(auditor_page):
    response = auditor_page.htmx("GET", "/admin/memory?q=x")
    assert response.text.lstrip().startswith('<section id="audit-results"')
    assert BANNER not in response.text


def test_audit_content_is_escaped(auditor_page, users, store):
    alice = users.user("alice")
    store.add(alice, "<script>alert(1)</script>")
    html = auditor_page.get(f"/admin/memory?userId={alice}").text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<script>alert(1)" not in html


def test_audit_of_an_unknown_user_says_there_is_no_such_user(auditor_page):
    html = auditor_page.htmx("GET", "/admin/memory?userId=9999").text
    assert "没有这个用户(ID 9999)" in html
    assert "该用户没有符合条件的记忆" not in html
    assert "的记忆</h2>" not in html


def test_audit_of_a_bad_user_id_is_refused(auditor_page):
    response = auditor_page.get("/admin/memory?userId=abc")
    assert response.status_code == 400
    assert "用户 ID 应是正整数:请检查地址,或用搜索查找用户。" in response.text


# ---- settings ---------------------------------------------------------------------------

def test_settings_page_offers_registered_models_for_the_extraction_model(admin_page, app):
    fast, big = _add_models(app)
    html = admin_page.get("/admin/settings").text
    assert "memory.extractionModelId" in html
    assert '<option value="">默认模型(fast)</option>' in html
    assert f'<option value="{fast}">fast · gpt-4o-mini</option>' in html
    assert f'<option value="{big}">big · gpt-4o</option>' in html


def test_saving_a_model_stores_its_id(admin_page, app):
    _, big = _add_models(app)
    response = admin_page.htmx("PUT", f"/admin/settings/{EXTRACTION_MODEL_KEY}",
                               {"value": str(big)})
    assert response.status_code == 200
    assert "已保存" in response.text
    assert f'<option value="{big}" selected>' in response.text
    assert _setting_value(app) == str(big)


def test_saving_empty_means_the_default_model(admin_page, app):
    _, big = _add_models(app)
    admin_page.htmx("PUT", f"/admin/settings/{EXTRACTION_MODEL_KEY}", {"value": str(big)})
    admin_page.htmx("PUT", f"/admin/settings/{EXTRACTION_MODEL_KEY}", {"value": ""})
    assert _setting_value(app) == ""


def test_unknown_model_is_refused_by_the_system_service(admin_page, app):
    _add_models(app)
    response = admin_page.htmx("PUT", f"/admin/settings/{EXTRACTION_MODEL_KEY}", {"value": "999"})
    assert response.status_code == 400
    assert "所选模型不存在(可能已被移除):请刷新页面后重新选择。" in response.text
    assert _setting_value(app) == ""


NOTHING_EXTRACTED = "自动收集不会提取任何记忆"


def test_model_setting_is_named_and_explained_in_chinese(admin_page):
    html = admin_page.get("/admin/settings").text
    assert f'<label for="setting-{EXTRACTION_MODEL_KEY}">抽取模型</label>' in html
    assert "自动收集用它从任务对话中提取记忆" in html


def test_model_setting_warns_when_no_model_is_registered(admin_page, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "a-key")
    assert "还没有可用的模型,自动收集不会提取任何记忆" in admin_page.get("/admin/settings").text
    response = admin_page.htmx("PUT", f"/admin/settings/{EXTRACTION_MODEL_KEY}", {"value": ""})
    assert "已保存" in response.text and NOTHING_EXTRACTED in response.text


def test_model_setting_warns_when_the_chosen_models_key_is_missing(admin_page, app, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "a-key")
    monkeypatch.delenv("BIG_MODEL_API_KEY", raising=False)
    with app.app_context():
        system.add_model("fast", "gpt-4o-mini", default=True)
        big = system.add_model("big", "gpt-4o", api_key_env="BIG_MODEL_API_KEY").id
        db.session.remove()
    assert NOTHING_EXTRACTED not in admin_page.get("/admin/settings").text
    response = admin_page.htmx("PUT", f"/admin/settings/{EXTRACTION_MODEL_KEY}",
                               {"value": str(big)})
    assert "所选模型的 API 密钥没有配置,自动收集不会提取任何记忆" in response.text


def test_saved_marker_is_marked_to_go_when_the_form_changes(admin_page):
    response = admin_page.htmx("PUT", f"/admin/settings/{EXTRACTION_MODEL_KEY}", {"value": ""})
    assert '<span class="ok" role="status" data-saved>已保存</span>' in response.text


def test_unknown_setting_is_refused(admin_page):
    response = admin_page.htmx("PUT", "/admin/settings/no.such.key", {"value": "x"})
    assert response.status_code == 400
    assert response.headers["HX-Retarget"] == "#toast"
    assert "没有这项设置:请刷新系统设置页面。" in response.text


# ---- content search and history (SPEC §8) ---------------------------------------------------

def test_audit_content_search_narrows_the_users_memories(auditor_page, users, store):
    alice = users.user("alice")
    store.add_many(alice, ["we use pnpm", "报告用中文", "100% coverage"])
    html = auditor_page.htmx("GET", f"/admin/memory?userId={alice}&text=PNPM").text
    assert "we use pnpm" in html and "报告用中文" not in html
    literal = auditor_page.htmx("GET", f"/admin/memory?userId={alice}&text=100%25").text
    assert "100% coverage" in literal and "we use pnpm" not in literal
    assert f'href="/admin/memory?userId={alice}&amp;scope=USER&amp;text=PNPM"' in html


def test_audit_history_panel_is_read_only_and_recorded_for_the_subject(app, auditor_page, users,
                                                                      store):
    alice = users.user("alice")
    item_id = store.add(alice, "报告用中文")
    html = auditor_page.get(f"/admin/memory?userId={alice}").text
    assert f'hx-get="/admin/memory/items/{item_id}/history"' in html
    response = auditor_page.htmx("GET", f"/admin/memory/items/{item_id}/history")
    assert response.status_code == 200
    assert "用户手动添加的记忆" in response.text
    with app.app_context():
        from app.memory import access_log
        from app.paging import PageRequest
        reads = access_log.page(PageRequest(1, 10), alice).records
    assert [(r.what.value, r.memory_id) for r in reads] == [("HISTORY", item_id), ("LIST", None)]


def test_audit_history_needs_memory_read(alice_page, store):
    item_id = store.add(alice_page.user_id, "报告用中文")
    assert alice_page.htmx("GET", f"/admin/memory/items/{item_id}/history").status_code == 403
