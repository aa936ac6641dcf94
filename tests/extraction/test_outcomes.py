"""One outcome per job, the admin list of outcomes, and the Prometheus metrics."""

from __future__ import annotations

import re

import pytest

from tests.completions import USER_ID, capture_on, event, outcomes
from tests.conftest import assert_error, assert_ok

OTHER_USER = USER_ID + 1


@pytest.fixture
def ran(app, llm, webhook, run_jobs, metrics):
    """Four jobs, one of each status: skipped, abandoned, succeeded (user 7); failed (user 8)."""
    capture_on(app)
    capture_on(app, OTHER_USER)
    llm.reply("this is not JSON")
    llm.reply_items([{"type": "user", "content": "输出报告用中文"}],
                    usage={"prompt_tokens": 1000, "completion_tokens": 20, "total_tokens": 1020})
    llm.reply(status=401)
    for body in (event(lastUserMessage="太短了"), event(), event(),
                 event(userId=OTHER_USER, sessionId=202)):
        assert_ok(webhook(body), 202)
        run_jobs()
    assert_ok(webhook(event(phase="CANCELLED")), 202)
    return outcomes(app)


def test_every_job_leaves_exactly_one_outcome(ran):
    assert [(o["status"], o["reason"]) for o in ran] == [
        ("skipped", "user_message_too_short"), ("abandoned", "invalid_output"),
        ("succeeded", "applied"), ("failed", "llm_rejected")]
    assert len({o["jobId"] for o in ran}) == 4 and len({o["eventId"] for o in ran}) == 4
    succeeded = ran[2]
    assert (succeeded["promptTokens"], succeeded["completionTokens"],
            succeeded["totalTokens"], succeeded["model"]) == (1000, 20, 1020, "scripted-default")
    assert succeeded["promptChars"] > 0 and succeeded["durationMs"] >= 0
    assert ran[0]["model"] is None and ran[0]["promptChars"] is None


def test_admins_list_outcomes_newest_first(ran, admin):
    page = assert_ok(admin.get("/api/v1/admin/outcomes"))
    assert (page["total"], page["current"], page["size"]) == (4, 1, 20)
    assert [r["id"] for r in page["records"]] == [o["id"] for o in reversed(ran)]
    assert page["records"][0] == ran[-1]


@pytest.mark.parametrize(("query", "statuses"), [
    (f"userId={USER_ID}", ["succeeded", "abandoned", "skipped"]),
    (f"userId={OTHER_USER}", ["failed"]),
    ("status=abandoned", ["abandoned"]),
    (f"userId={USER_ID}&status=failed", []),
    ("kind=extraction&pageSize=2&page=2", ["abandoned", "skipped"]),
    ("kind=consolidation", []),
])
def test_outcomes_filter_by_user_status_and_kind(ran, admin, query, statuses):
    page = assert_ok(admin.get(f"/api/v1/admin/outcomes?{query}"))
    assert [r["status"] for r in page["records"]] == statuses


@pytest.mark.parametrize("query", ["status=done", "userId=abc", "userId=0", "page=0",
                                   "pageSize=101", "kind=" + "k" * 33])
def test_outcomes_refuse_bad_parameters(admin, query):
    assert_error(admin.get(f"/api/v1/admin/outcomes?{query}"), 400, 2001)


def test_outcomes_are_for_admins_only(client, users, as_user, as_service):
    users.user("auditor", grants=("memory:read",))
    assert_error(as_user(users.token("auditor")).get("/api/v1/admin/outcomes"), 403, 1002)
    assert_error(as_service(USER_ID).get("/api/v1/admin/outcomes"), 403, 1002)
    response = client.get("/api/v1/admin/outcomes")
    assert response.status_code == 401


def test_metrics_count_outcomes_durations_tokens_and_webhook_answers(ran, client, metrics):
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.content_type.startswith("text/plain; version=0.0.4")
    text = response.get_data(as_text=True)
    assert "# TYPE memory_jobs_total counter" in text
    assert "# TYPE memory_job_duration_seconds histogram" in text
    for status, reason in [("skipped", "user_message_too_short"),
                           ("abandoned", "invalid_output"), ("succeeded", "applied"),
                           ("failed", "llm_rejected")]:
        assert metrics.added("memory_jobs_total", kind="extraction", status=status,
                             reason=reason) == 1
    bounds = re.findall(r'^memory_job_duration_seconds_bucket\{kind="extraction",le="([^"]+)"\}',
                        text, re.M)
    buckets = [metrics.added("memory_job_duration_seconds_bucket", kind="extraction", le=le)
               for le in bounds]
    assert bounds[-1] == "+Inf" and buckets == sorted(buckets) and buckets[-1] == 4
    assert metrics.added("memory_job_duration_seconds_count", kind="extraction") == 4
    assert metrics.added("memory_job_duration_seconds_sum", kind="extraction") >= 0
    assert metrics.added("memory_llm_tokens_total", kind="extraction",
                         model="scripted-default", type="prompt") == 1000 + 321
    assert metrics.added("memory_webhook_events_total", reason="enqueued") == 4
    assert metrics.added("memory_webhook_events_total", reason="phase_not_completed") == 1
