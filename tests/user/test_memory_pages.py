"""我的记忆: every action goes through the memory service, so the page obeys D3, D7, D12."""

from __future__ import annotations

import re

import pytest

from app.extensions import db
from app.memory.rules import ACTIVE_PER_USER_MAX, MANUAL_CONTENT_MAX
from app.system import service as system
from tests.page_support import PageSession

SCRIPT = "<script>alert('记忆')</script>"
ESCAPED_SCRIPT = "&lt;script&gt;alert(&#39;记忆&#39;)&lt;/script&gt;"


def _ids(html: str) -> list[int]:
    """Memory ids in the order the rows appear."""
    return [int(i) for i in re.findall(r'<li class="memory-row[^"]*" id="memory-(\d+)"', html)]


def _create(page: PageSession, content: str, scope: str = "USER", project_key: str | None = None,
            headers: dict[str, str] | None = None):
    form = {"scope": scope, "content": content}
    if project_key is not None:
        form["projectKey"] = project_key
    return page.htmx("POST", "/settings/memory/items", form, headers=headers)


# ---- the page ---------------------------------------------------------------------------

def test_page_has_the_labels_of_the_design(alice_page):
    html = alice_page.get("/settings/memory").text
    for label in ("我的记忆", "自动收集", "新增记忆", ">全部<", ">用户<", ">项目<", ">生效中<",
                  ">已忽略<"):
        assert label in html


def test_empty_state_explains_memories_and_that_auto_capture_is_off_by_default(alice_page):
    html = alice_page.get("/settings/memory").text
    assert "还没有记忆" in html
    assert "记忆是 Agent 在新会话开始时参考的长期事实和偏好" in html
    assert "「自动收集」默认关闭" in html
    assert 'role="switch"' in html and 'aria-checked="false"' in html


def test_list_shows_content_source_badge_project_and_time(alice_page, store):
    uid = alice_page.user_id
    store.add(uid, "我喜欢简洁的回答", source="AUTO")
    store.add(uid, "测试用 Vitest", scope="PROJECT", project_key="mao", source="CONSOLIDATED")
    store.add(uid, "回答用中文")
    html = alice_page.get("/settings/memory").text
    assert '<span class="badge badge-auto" title="来源">自动</span>' in html
    assert '<span class="badge badge-manual" title="来源">手动</span>' in html
    assert '<span class="badge badge-consolidated" title="来源">合并</span>' in html
    assert "项目 · <code>mao</code>" in html
    assert re.search(r'<time datetime="\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ">', html)


def test_list_is_newest_first(alice_page, store):
    first, second = store.add_many(alice_page.user_id, ["一", "二"])
    assert _ids(alice_page.get("/settings/memory").text) == [second, first]


def test_list_shows_only_the_users_own_memories(alice_page, users, store):
    bob = users.user("bob")
    store.add(bob, "bob 的秘密")
    assert "bob 的秘密" not in alice_page.get("/settings/memory").text


def test_status_filter_defaults_to_active(alice_page, store):
    uid = alice_page.user_id
    store.add(uid, "生效的那条")
    store.add(uid, "忽略的那条", status="DISMISSED")
    html = alice_page.get("/settings/memory").text
    assert "生效的那条" in html and "忽略的那条" not in html
    html = alice_page.htmx("GET", "/settings/memory?status=DISMISSED").text
    assert "忽略的那条" in html and "生效的那条" not in html


@pytest.mark.parametrize(("scope", "shown", "hidden"), [
    ("USER", "用户级的", "项目级的"),
    ("PROJECT", "项目级的", "用户级的"),
])
def test_scope_tab_lists_only_that_scope(alice_page, store, scope, shown, hidden):
    uid = alice_page.user_id
    store.add(uid, "用户级的")
    store.add(uid, "项目级的", scope="PROJECT", project_key="mao")
    html = alice_page.htmx("GET", f"/settings/memory?scope={scope}").text
    assert shown in html and hidden not in html
    assert f'class="active" aria-current="true">{"用户" if scope == "USER" else "项目"}<' in html


def test_tabs_fetch_and_push_the_page_url(alice_page):
    html = alice_page.get("/settings/memory?status=DISMISSED").text
    assert ('<a href="/settings/memory?scope=USER&amp;status=DISMISSED" '
            'hx-get="/settings/memory?scope=USER&amp;status=DISMISSED"') in html
    assert len(re.findall(r'<a href="[^"]*" hx-get="[^"]*"[^>]*hx-push-url="true"', html)) == 5


def test_reload_keeps_the_view_in_the_url(alice_page, store):
    store.add(alice_page.user_id, "忽略的那条", status="DISMISSED")
    html = alice_page.get("/settings/memory?status=DISMISSED").text
    assert "忽略的那条" in html
    assert '<input type="hidden" name="status" value="DISMISSED">' in html


def test_list_pages_past_twenty_rows(alice_page, store):
    ids = store.add_many(alice_page.user_id, [f"第 {n} 条" for n in range(21)])
    html = alice_page.get("/settings/memory").text
    assert len(_ids(html)) == 20
    assert "第 1 / 2 页" in html
    assert 'href="/settings/memory?page=2"' in html
    assert _ids(alice_page.htmx("GET", "/settings/memory?page=2").text) == [ids[0]]


def test_twenty_rows_need_no_pager(alice_page, store):
    store.add_many(alice_page.user_id, [f"第 {n} 条" for n in range(20)])
    assert 'class="pager"' not in alice_page.get("/settings/memory").text


def test_bad_filter_value_is_refused_in_chinese_saying_what_to_do(alice_page):
    response = alice_page.get("/settings/memory?status=GONE")
    assert response.status_code == 400
    assert "状态只能是「生效中」或「已忽略」:请用页面上的筛选切换。" in response.text
    assert "status must be" not in response.text


# ---- adding -----------------------------------------------------------------------------

def test_added_memory_is_manual_active_and_joins_the_top_of_the_list_on_screen(alice_page,
                                                                             store):
    older = store.add(alice_page.user_id, "旧的一条")
    response = _create(alice_page, "  回答请用中文  ")
    assert response.status_code == 201
    [item] = [m for m in store.of(alice_page.user_id) if m["id"] != older]
    assert (item["content"], item["source"], item["status"]) == ("回答请用中文", "MANUAL", "ACTIVE")
    # Only the new row, out of band at the top: the rows on screen (an open edit too) stay.
    assert _ids(response.text) == [item["id"]]
    assert '<ul hx-swap-oob="afterbegin:#memory-rows">' in response.text
    assert '<p id="memory-summary" class="summary" hx-swap-oob="true">共 2 条</p>' in response.text
    assert "已新增记忆" in response.text
    assert "HX-Retarget" not in response.headers
    assert response.headers["HX-Trigger"] == "memory-created"


def test_first_memory_renders_the_list_in_place_of_the_empty_state(alice_page):
    response = _create(alice_page, "回答请用中文")
    assert response.headers["HX-Retarget"] == "#memory-list"
    assert response.headers["HX-Reswap"] == "outerHTML"
    assert response.headers["HX-Trigger"] == "memory-created"
    assert response.text.lstrip().startswith('<section id="memory-list"')


def test_memory_added_outside_the_view_on_screen_is_announced_with_a_link(alice_page, store):
    store.add(alice_page.user_id, "忽略的那条", status="DISMISSED")
    response = _create(alice_page, "回答请用中文", headers={
        "HX-Current-URL": "http://localhost/settings/memory?status=DISMISSED"})
    assert response.status_code == 201
    assert _ids(response.text) == []
    assert "已新增记忆,它在「全部 · 生效中」的最前面。" in response.text
    assert 'hx-get="/settings/memory"' in response.text
    assert response.headers["HX-Trigger"] == "memory-created"


def test_duplicate_is_shown_in_the_dialog(alice_page, store):
    store.add(alice_page.user_id, "回答 请用中文")
    response = _create(alice_page, "回答\n请用中文")
    assert response.status_code == 409
    assert "已有相同内容的记忆" in response.text
    # No retarget: the answer lands in the dialog's error slot and the form keeps its text.
    assert "HX-Retarget" not in response.headers
    assert 'id="memory-list"' not in response.text


def test_memory_added_under_an_address_the_page_would_refuse_is_still_added(alice_page, store):
    response = _create(alice_page, "回答请用中文", headers={
        "HX-Current-URL": "http://localhost/settings/memory?status=GONE"})
    assert response.status_code == 201
    assert response.headers["HX-Trigger"] == "memory-created"
    assert len(store.of(alice_page.user_id)) == 1


def test_too_long_content_is_refused(alice_page, store):
    response = _create(alice_page, "长" * (MANUAL_CONTENT_MAX + 1))
    assert response.status_code == 400
    limit = MANUAL_CONTENT_MAX
    assert f"内容超过 {limit} 字:请精简到 {limit} 字以内。" in response.text
    assert store.of(alice_page.user_id) == []


def test_content_of_exactly_the_limit_is_accepted(alice_page):
    assert _create(alice_page, "长" * MANUAL_CONTENT_MAX).status_code == 201


def test_blank_content_is_refused(alice_page):
    response = _create(alice_page, " \n ")
    assert response.status_code == 400
    assert "内容不能为空:请写下要记住的内容。" in response.text
    assert "超过" not in response.text


def test_adding_past_the_active_cap_is_refused(alice_page, store):
    store.add_many(alice_page.user_id, [f"m{n}" for n in range(ACTIVE_PER_USER_MAX)])
    response = _create(alice_page, "再来一条")
    assert response.status_code == 409
    assert f"已达 {ACTIVE_PER_USER_MAX} 条上限" in response.text


def test_project_memory_is_bound_to_the_chosen_project(alice_page, store):
    response = _create(alice_page, "测试用 Vitest", scope="PROJECT", project_key="mao")
    assert response.status_code == 201
    [item] = store.of(alice_page.user_id)
    assert (item["scope"], item["projectKey"]) == ("PROJECT", "mao")
    assert "项目 · <code>mao</code>" in response.text


@pytest.mark.parametrize(("project_key", "message"), [
    (None, "项目级记忆需要一个项目:请选择或输入项目标识。"),
    ("weixin-bot", "不是项目:请换一个项目,或改为用户级记忆。"),
    ("feishu-chat-42-x", "不是项目:请换一个项目,或改为用户级记忆。"),
])
def test_project_memory_needs_a_real_project(alice_page, store, project_key, message):
    response = _create(alice_page, "测试用 Vitest", scope="PROJECT", project_key=project_key)
    assert response.status_code == 400
    assert message in response.text
    assert store.of(alice_page.user_id) == []


def test_project_picker_offers_the_users_projects_without_bot_keys(alice_page, users, store):
    uid = alice_page.user_id
    store.session(uid, "zeta", 1)
    store.session(uid, "mao", 2)
    store.session(uid, "weixin-bot", 3)
    store.session(users.user("bob"), "bobs-project", 4)
    html = alice_page.htmx("GET", "/settings/memory/projects?scope=PROJECT").text
    assert re.findall(r'<option value="([^"]*)">', html) == ["mao", "zeta"]


def test_project_picker_offers_projects_the_user_has_memories_under(alice_page, users, store):
    uid = alice_page.user_id
    store.add(uid, "旧项目里的", scope="PROJECT", project_key="legacy", status="DISMISSED")
    store.add(uid, "另一个项目里的", scope="PROJECT", project_key="mao")
    store.session(uid, "mao", 1)
    store.add(users.user("bob"), "bob 的", scope="PROJECT", project_key="bobs-project")
    html = alice_page.htmx("GET", "/settings/memory/projects?scope=PROJECT").text
    assert re.findall(r'<option value="([^"]*)">', html) == ["legacy", "mao"]


def test_projects_endpoint_still_answers_only_reported_projects(alice_page, store):
    store.add(alice_page.user_id, "旧项目里的", scope="PROJECT", project_key="legacy")
    store.session(alice_page.user_id, "mao", 1)
    response = alice_page.htmx("GET", "/api/v1/memory/projects")
    assert response.get_json()["data"] == {"projects": ["mao"]}


def test_project_picker_takes_a_new_project_key(alice_page):
    html = alice_page.htmx("GET", "/settings/memory/projects?scope=PROJECT").text
    assert '<input id="memory-dialog-project" name="projectKey" list="memory-project-keys"' in html
    assert "还没有可选的项目" in html
    assert "<select" not in html


def test_project_picker_is_absent_for_user_scope(alice_page, store):
    store.session(alice_page.user_id, "mao", 1)
    assert alice_page.htmx("GET", "/settings/memory/projects?scope=USER").text.strip() == ""


# ---- editing ----------------------------------------------------------------------------

def test_edit_form_holds_the_current_content(alice_page, store):
    item = store.add(alice_page.user_id, "旧内容")
    html = alice_page.htmx("GET", f"/settings/memory/items/{item}/edit").text
    assert f'<li class="memory-row editing" id="memory-{item}">' in html
    assert "旧内容</textarea>" in html
    assert ">保存<" in html and ">取消<" in html


def test_cancel_returns_the_row_unchanged(alice_page, store):
    item = store.add(alice_page.user_id, "旧内容")
    html = alice_page.htmx("GET", f"/settings/memory/items/{item}").text
    assert f'<li class="memory-row" id="memory-{item}">' in html
    assert "旧内容" in html


def test_saved_edit_returns_only_that_row_with_the_new_content(alice_page, store):
    item = store.add(alice_page.user_id, "旧内容")
    response = alice_page.htmx("PATCH", f"/settings/memory/items/{item}", {"content": "新内容"})
    assert response.status_code == 200
    assert _ids(response.text) == [item]
    assert "新内容" in response.text
    assert store.get(item)["content"] == "新内容"


def test_editing_a_dismissed_memory_keeps_it_dismissed(alice_page, store):
    item = store.add(alice_page.user_id, "旧内容", status="DISMISSED")
    alice_page.htmx("PATCH", f"/settings/memory/items/{item}", {"content": "新内容"})
    assert store.get(item)["status"] == "DISMISSED"


def test_refused_edit_keeps_the_typed_text_and_says_why(alice_page, store):
    uid = alice_page.user_id
    store.add(uid, "已有的内容")
    item = store.add(uid, "旧内容")
    response = alice_page.htmx("PATCH", f"/settings/memory/items/{item}",
                               {"content": "已有的内容"})
    assert response.status_code == 409
    assert "已有相同内容的记忆" in response.text
    assert "\n已有的内容</textarea>" in response.text
    assert store.get(item)["content"] == "旧内容"


# ---- dismiss, restore, delete -----------------------------------------------------------

def test_dismissed_memory_leaves_a_line_with_undo_in_its_place(alice_page, store):
    item = store.add(alice_page.user_id, "要忽略的")
    response = alice_page.htmx("PATCH", f"/settings/memory/items/{item}/status",
                               {"new_status": "DISMISSED", "status": "ACTIVE"})
    assert response.status_code == 200
    assert f'<li class="memory-row gone" id="memory-{item}">' in response.text
    assert "已忽略「要忽略的」,Agent 不再使用它。" in response.text
    # 撤销 puts back the status of the view on screen, and takes the focus.
    assert """hx-vals='{"new_status": "ACTIVE", """ in response.text
    assert "autofocus" in response.text
    assert store.get(item)["status"] == "DISMISSED"
    dismissed = alice_page.htmx("GET", "/settings/memory?status=DISMISSED").text
    assert _ids(dismissed) == [item]
    assert ">恢复<" in dismissed


def test_undo_brings_the_row_back_with_the_focus_on_its_action(alice_page, store):
    item = store.add(alice_page.user_id, "要忽略的", status="DISMISSED")
    response = alice_page.htmx("PATCH", f"/settings/memory/items/{item}/status",
                               {"new_status": "ACTIVE", "status": "ACTIVE"})
    assert _ids(response.text) == [item]
    assert re.search(r"autofocus>忽略</button>", response.text)
    assert store.get(item)["status"] == "ACTIVE"


def test_restored_memory_is_active_again(alice_page, store):
    item = store.add(alice_page.user_id, "要恢复的", status="DISMISSED")
    response = alice_page.htmx("PATCH", f"/settings/memory/items/{item}/status",
                               {"new_status": "ACTIVE", "status": "DISMISSED"})
    assert "已恢复「要恢复的」,Agent 会再次使用它。" in response.text
    assert """hx-vals='{"new_status": "DISMISSED", """ in response.text
    assert store.get(item)["status"] == "ACTIVE"


def test_restoring_past_the_active_cap_is_refused(alice_page, store):
    uid = alice_page.user_id
    store.add_many(uid, [f"m{n}" for n in range(ACTIVE_PER_USER_MAX)])
    item = store.add(uid, "要恢复的", status="DISMISSED")
    response = alice_page.htmx("PATCH", f"/settings/memory/items/{item}/status",
                               {"new_status": "ACTIVE", "status": "DISMISSED"})
    assert response.status_code == 409
    assert response.headers["HX-Retarget"] == "#toast"
    assert f"已达 {ACTIVE_PER_USER_MAX} 条上限" in response.text
    assert store.get(item)["status"] == "DISMISSED"


def test_row_actions_answer_the_count_of_the_view_on_screen(alice_page, store):
    uid = alice_page.user_id
    store.add(uid, "项目级的", scope="PROJECT", project_key="mao")
    kept, item = store.add_many(uid, ["留下的", "要忽略的"])
    response = alice_page.htmx("PATCH", f"/settings/memory/items/{item}/status",
                               {"new_status": "DISMISSED", "scope": "USER", "status": "ACTIVE"})
    assert '<p id="memory-summary" class="summary" hx-swap-oob="true">共 1 条</p>' in response.text
    assert f'<li class="memory-row gone" id="memory-{item}">' in response.text


def test_deleted_memory_is_gone_for_good(alice_page, store):
    item = store.add(alice_page.user_id, "要删除的")
    response = alice_page.client.delete(f"/settings/memory/items/{item}?status=ACTIVE",
                                        headers={"HX-Request": "true",
                                                 "X-CSRF-Token": alice_page.csrf})
    assert response.status_code == 200
    assert store.get(item) is None
    assert "已删除「要删除的」。" in response.text
    assert '<p id="memory-summary" class="summary" hx-swap-oob="true">共 0 条</p>' in response.text


def test_a_page_past_the_last_shows_the_last_page(alice_page, store):
    store.add_many(alice_page.user_id, [f"第 {n} 条" for n in range(20)])
    response = alice_page.htmx("GET", "/settings/memory?page=2")
    assert len(_ids(response.text)) == 20
    assert '<input type="hidden" name="page" value="1">' in response.text


def test_delete_asks_for_confirmation_naming_the_memory(alice_page, store):
    item = store.add(alice_page.user_id, "要删除的")
    assert "hx-confirm" not in alice_page.get("/settings/memory").text
    html = alice_page.htmx("GET", f"/settings/memory/items/{item}/delete").text
    assert f'<li class="memory-row confirming" id="memory-{item}">' in html
    assert "确定删除「要删除的」吗?删除后无法恢复" in html
    assert f'hx-delete="/settings/memory/items/{item}"' in html
    assert store.get(item) is not None


@pytest.mark.parametrize(("method", "path", "form"), [
    ("GET", "/settings/memory/items/{item}", None),
    ("GET", "/settings/memory/items/{item}/edit", None),
    ("GET", "/settings/memory/items/{item}/delete", None),
    ("PATCH", "/settings/memory/items/{item}", {"content": "抢来的"}),
    ("PATCH", "/settings/memory/items/{item}/status", {"new_status": "DISMISSED"}),
    ("DELETE", "/settings/memory/items/{item}", None),
])
def test_another_users_memory_is_not_found(alice_page, users, store, method, path, form):
    item = store.add(users.user("bob"), "bob 的秘密")
    response = alice_page.htmx(method, path.format(item=item), form)
    assert response.status_code == 404
    assert "这条记忆已不存在(可能已在别处删除):请刷新页面。" in response.text
    assert "bob 的秘密" not in response.text
    assert store.get(item)["content"] == "bob 的秘密"
    assert store.get(item)["status"] == "ACTIVE"


# ---- auto-capture -----------------------------------------------------------------------

def test_auto_capture_switch_persists(alice_page):
    response = alice_page.htmx("PATCH", "/settings/memory/auto-capture", {"enabled": "true"})
    assert 'aria-checked="true"' in response.text
    assert """hx-vals='{"enabled": "false"}'""" in response.text
    assert 'aria-checked="true"' in alice_page.get("/settings/memory").text
    alice_page.htmx("PATCH", "/settings/memory/auto-capture", {"enabled": "false"})
    assert 'aria-checked="false"' in alice_page.get("/settings/memory").text


def test_auto_capture_refuses_anything_but_true_or_false(alice_page):
    response = alice_page.htmx("PATCH", "/settings/memory/auto-capture", {"enabled": "yes"})
    assert response.status_code == 400
    assert "自动收集只能开启或关闭:请刷新页面后再点开关。" in response.text


NOTHING_CAPTURED = "暂时不会自动收集任何记忆"


def test_auto_capture_on_without_a_model_says_so_beside_the_switch(alice_page, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert NOTHING_CAPTURED not in alice_page.get("/settings/memory").text
    response = alice_page.htmx("PATCH", "/settings/memory/auto-capture", {"enabled": "true"})
    assert "系统还没有配置可用的模型,暂时不会自动收集任何记忆" in response.text
    assert 'aria-describedby="auto-capture-help auto-capture-warning"' in response.text
    assert NOTHING_CAPTURED in alice_page.get("/settings/memory").text


def test_auto_capture_on_with_a_model_whose_key_is_missing_says_so(alice_page, app,
                                                                   monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with app.app_context():
        system.add_model("fast", "gpt-4o-mini", default=True)
        db.session.remove()
    response = alice_page.htmx("PATCH", "/settings/memory/auto-capture", {"enabled": "true"})
    assert "系统的模型密钥还没有配置,暂时不会自动收集任何记忆" in response.text


def test_auto_capture_on_with_a_model_that_can_run_says_nothing_more(alice_page, app,
                                                                     monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "a-key")
    with app.app_context():
        system.add_model("fast", "gpt-4o-mini", default=True)
        db.session.remove()
    response = alice_page.htmx("PATCH", "/settings/memory/auto-capture", {"enabled": "true"})
    assert NOTHING_CAPTURED not in response.text


# ---- escaping ---------------------------------------------------------------------------

def test_script_content_is_escaped_in_the_list(alice_page, store):
    store.add(alice_page.user_id, SCRIPT)
    html = alice_page.get("/settings/memory").text
    assert ESCAPED_SCRIPT in html
    assert SCRIPT not in html


def test_script_content_is_escaped_in_the_edit_form(alice_page, store):
    item = store.add(alice_page.user_id, SCRIPT)
    html = alice_page.htmx("GET", f"/settings/memory/items/{item}/edit").text
    assert ESCAPED_SCRIPT in html
    assert SCRIPT not in html


def test_script_content_is_escaped_when_added(alice_page):
    response = _create(alice_page, SCRIPT)
    assert ESCAPED_SCRIPT in response.text
    assert SCRIPT not in response.text


def test_script_project_key_is_escaped(alice_page, store):
    store.add(alice_page.user_id, "内容", scope="PROJECT", project_key="<b>x</b>")
    store.session(alice_page.user_id, "<b>x</b>", 1)
    assert "&lt;b&gt;x&lt;/b&gt;" in alice_page.get("/settings/memory").text
    fragment = alice_page.htmx("GET", "/settings/memory/projects?scope=PROJECT").text
    assert "<b>" not in fragment
