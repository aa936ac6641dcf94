"""任务记录 (/admin/outcomes): what became of each background job, readable without a log, and
where the tokens went — for admins only, filters kept in the URL."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import pytest
import sqlalchemy as sa

from app.extensions import db
from app.extraction.models import JobOutcome
from tests.completions import USER_ID, capture_on, event
from tests.conftest import assert_ok

OTHER_USER = USER_ID + 1
USAGE = {"prompt_tokens": 1000, "completion_tokens": 20, "total_tokens": 1020}


@pytest.fixture
def ran(app, llm, webhook, run_jobs, users):
    """Real jobs, oldest first: skipped (too short), abandoned (not JSON), succeeded with
    tokens (user 7, alice); failed (the model refused: user 8), succeeded with tokens (user 8)."""
    users.user("alice", user_id=USER_ID)
    capture_on(app)
    capture_on(app, OTHER_USER)
    llm.reply("this is not JSON")
    llm.reply_items([{"type": "user", "content": "输出报告用中文"}], usage=USAGE)
    llm.reply(status=401)
    llm.reply_items([], usage={"prompt_tokens": 300, "completion_tokens": 3,
                               "total_tokens": 303})
    for body in (event(lastUserMessage="太短了"), event(), event(),
                 event(userId=OTHER_USER, sessionId=202),
                 event(userId=OTHER_USER, sessionId=203)):
        assert_ok(webhook(body), 202)
        run_jobs()


def _rows(html: str) -> list[str]:
    """The outcome rows' statuses, top to bottom."""
    return re.findall(r'<tr class="outcome-(\w+)">', html)


@pytest.mark.parametrize(("grants", "status"), [((), 403), (("memory:read",), 403)])
def test_outcomes_page_is_for_admins_only(users, pages, grants, status):
    users.user("carol", grants=grants)
    pages.login("carol")
    response = pages.get("/admin/outcomes")
    assert response.status_code == status
    assert "任务记录仅管理员可用" in response.text
    assert pages.htmx("GET", "/admin/outcomes?status=failed").status_code == status


def test_outcomes_page_sends_a_visitor_to_login_first(client):
    response = client.get("/admin/outcomes?status=failed")
    assert response.status_code == 302
    location = urlsplit(response.headers["Location"])
    assert location.path == "/login"
    assert parse_qs(location.query)["next"] == ["/admin/outcomes?status=failed"]


def test_outcomes_page_lists_recent_jobs_newest_first(ran, admin_page):
    html = admin_page.get("/admin/outcomes").text
    assert "<h1>任务记录</h1>" in html
    assert _rows(html) == ["succeeded", "failed", "succeeded", "abandoned", "skipped"]
    assert "共 5 条" in html
    applied = html[html.index('<tr class="outcome-succeeded">', html.index("outcome-failed")):]
    applied = applied[:applied.index("</tr>")]
    for shown in ("提取", "alice", f"ID {USER_ID}", "101", "成功", "已写入记忆",
                  "<code>scripted-default</code>", ">1020</span>", "输入 1000 · 输出 20", " ms"):
        assert shown in applied, shown


def test_a_failed_job_says_why_in_chinese(ran, admin_page):
    html = admin_page.get("/admin/outcomes?status=failed").text
    assert _rows(html) == ["failed"]
    assert "<strong>失败</strong>" in html
    assert "模型服务拒绝了请求(4xx):检查模型名、地址和密钥" in html
    assert '<code class="muted">llm_rejected</code>' in html


def test_a_job_without_a_model_says_so(app, admin_page, webhook, run_jobs):
    capture_on(app)
    assert_ok(webhook(event()), 202)
    run_jobs()
    html = admin_page.get("/admin/outcomes").text
    assert "未配置提取模型" in html and '<code class="muted">no_model</code>' in html


def test_a_reason_the_page_does_not_know_is_shown_as_recorded(app, admin_page):
    with app.app_context():
        db.session.add(JobOutcome(
            kind="extraction", job_id="job-new-reason", user_id=USER_ID, status="failed",
            reason="brand_new_reason", attempts=1, inserted=0, touched=0, updated=0,
            dropped=0, demoted=0, duration_ms=5))
        db.session.commit()
    assert "brand_new_reason <code" in admin_page.get("/admin/outcomes").text


def test_outcome_filters_are_kept_in_the_url(ran, admin_page):
    response = admin_page.htmx("GET", f"/admin/outcomes?status=succeeded&userId={OTHER_USER}")
    html = response.text
    assert "<html" not in html
    assert html.count('id="outcome-results"') == 1
    assert _rows(html) == ["succeeded"]
    assert "HX-Request" in response.vary
    # Each link keeps the other filter; the user form keeps the status.
    assert f'href="/admin/outcomes?status=failed&amp;userId={OTHER_USER}"' in html
    assert '<input type="hidden" name="status" value="succeeded">' in html
    assert 'href="/admin/outcomes?status=succeeded"' in html  # 全部用户
    assert 'hx-push-url="true"' in html


@pytest.mark.parametrize(("query", "says"), [("status=done", "状态筛选不对"),
                                           ("userId=abc", "用户 ID 应是正整数"),
                                           ("page=0", "页码不对")])
def test_outcomes_page_refuses_bad_filters(admin_page, query, says):
    response = admin_page.get(f"/admin/outcomes?{query}")
    assert response.status_code == 400
    assert says in response.text


def test_token_totals_per_user_and_model_follow_the_filters(ran, admin_page):
    html = admin_page.get("/admin/outcomes").text
    totals = html[html.index('<table class="token-totals">'):]
    cells = re.findall(r"<td>(\d+)</td><td>(\d+)</td>\s*<td>(\d+)</td><td>(\d+)</td>", totals)
    # User 7: one call with usage (the abandoned one reported the default usage too).
    assert cells == [("2", "1321", "32", "1353"), ("1", "300", "3", "303")]
    filtered = admin_page.get(f"/admin/outcomes?userId={OTHER_USER}").text
    totals = filtered[filtered.index('<table class="token-totals">'):]
    assert re.findall(r"<td>(\d+)</td><td>(\d+)</td>\s*<td>(\d+)</td><td>(\d+)</td>",
                      totals) == [("1", "300", "3", "303")]


def _outcome(user_id: int, job: int) -> dict:
    return {"kind": "extraction", "job_id": f"job-{job}", "user_id": user_id,
            "status": "succeeded", "reason": "applied", "attempts": 1, "model": "m",
            "total_tokens": 10, "inserted": 1, "touched": 0, "updated": 0, "dropped": 0,
            "demoted": 0, "duration_ms": 5}


def test_token_totals_for_one_user_read_through_the_user_index(app):
    """EXPLAIN of the very statement the page runs for one user's totals, among many users'."""
    with app.app_context():
        rows = [_outcome(1000 + n % 300, n) for n in range(600)]
        rows += [_outcome(USER_ID, 600 + n) for n in range(3)]
        db.session.execute(sa.insert(JobOutcome), rows)
        db.session.commit()
        db.session.execute(sa.text("ANALYZE TABLE memory_job_outcome"))
        statements = []

        def capture(conn, cursor, statement, parameters, context, executemany):
            statements.append((statement, parameters))

        sa.event.listen(db.engine, "before_cursor_execute", capture)
        try:
            assert JobOutcome.token_totals_by_user(user_id=USER_ID) == [
                (USER_ID, "m", 3, 0, 0, 30)]
        finally:
            sa.event.remove(db.engine, "before_cursor_execute", capture)
        (statement, parameters), = statements
        with db.engine.connect() as conn:
            plan = conn.exec_driver_sql("EXPLAIN " + statement, parameters).mappings().all()
        assert [row["key"] for row in plan] == ["idx_memory_job_outcome_user"]


def test_navigation_links_the_outcomes_page_for_admins_only(users, pages, admin_page):
    assert 'href="/admin/outcomes"' in admin_page.get("/settings/memory").text
    users.user("audrey", grants=("memory:read",))
    pages.login("audrey")
    assert 'href="/admin/outcomes"' not in pages.get("/settings/memory").text
