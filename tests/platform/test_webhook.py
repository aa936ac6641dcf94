"""The completion webhook (SPEC §5): signature, body, session record, D2/D6/D9, idempotency."""

from __future__ import annotations

import json
import re
import threading
import time

import pytest
import sqlalchemy as sa

from app.extensions import db
from app.extraction.models import WebhookEvent
from app.sessions.models import PlatformSession
from app.system.installation import installation
from tests.completions import (
    SESSION_ID,
    USER_ID,
    capture_on,
    event,
    outcomes,
    post_webhook,
    queued,
    rows,
    signed_headers,
)
from tests.conftest import WEBHOOK_SECRET, assert_error, assert_ok

# ---- authenticity ------------------------------------------------------------------------

def test_missing_signature_is_401(app, client):
    assert_error(post_webhook(client, event(), secret=WEBHOOK_SECRET, headers={}), 401, 1001)


def test_signature_with_another_secret_is_401(app, client):
    assert_error(post_webhook(client, event(), secret="not-the-secret"), 401, 1001)


def test_signature_of_another_body_is_401(app, client):
    body = json.dumps(event()).encode()
    headers = signed_headers(body, WEBHOOK_SECRET)
    tampered = body.replace(b'"NORMAL"', b'"NORMAX"')
    assert_error(post_webhook(client, tampered, secret=WEBHOOK_SECRET, headers=headers),
                 401, 1001)


@pytest.mark.parametrize("skew", [-301, 301, -10_000])
def test_timestamp_more_than_300_s_off_is_401(app, client, skew):
    raw = json.dumps(event()).encode()
    headers = signed_headers(raw, WEBHOOK_SECRET, int(time.time()) + skew)
    assert_error(post_webhook(client, raw, secret=WEBHOOK_SECRET, headers=headers), 401, 1001)


@pytest.mark.parametrize("skew", [-290, 290])
def test_timestamp_within_300_s_is_accepted(app, client, skew):
    raw = json.dumps(event()).encode()
    headers = signed_headers(raw, WEBHOOK_SECRET, int(time.time()) + skew)
    assert_ok(post_webhook(client, raw, secret=WEBHOOK_SECRET, headers=headers), 202)


@pytest.mark.parametrize("stamp", ["", "abc", "1e9", "-5", "１２３"])
def test_malformed_timestamp_is_401(app, client, stamp):
    raw = json.dumps(event()).encode()
    headers = {**signed_headers(raw, WEBHOOK_SECRET), "X-Memory-Timestamp": stamp}
    assert_error(post_webhook(client, raw, secret=WEBHOOK_SECRET, headers=headers), 401, 1001)


def test_unauthenticated_delivery_records_nothing(app, client):
    post_webhook(client, event(), secret="wrong")
    assert rows(app, WebhookEvent) == [] and rows(app, PlatformSession) == []


def test_without_a_configured_secret_the_webhook_is_503(make_app):
    app = make_app(MEMORY_WEBHOOK_SECRET=None)
    result = post_webhook(app.test_client(), event(), secret=WEBHOOK_SECRET)
    assert_error(result, 503, 5001)


# ---- body --------------------------------------------------------------------------------

@pytest.mark.parametrize(("change", "field"), [
    ({"eventId": None}, "eventId"),
    ({"eventId": ""}, "eventId"),
    ({"eventId": "x" * 129}, "eventId"),
    ({"eventId": 12}, "eventId"),
    ({"sessionId": None}, "sessionId"),
    ({"sessionId": "101"}, "sessionId"),
    ({"sessionId": 0}, "sessionId"),
    ({"sessionId": True}, "sessionId"),
    ({"userId": 2**63}, "userId"),
    ({"userId": 1.5}, "userId"),
    ({"phase": None}, "phase"),
    ({"phase": "   "}, "phase"),
    ({"projectKey": 5}, "projectKey"),
    ({"projectKey": "k" * 256}, "projectKey"),
    ({"workspace": ["a"]}, "workspace"),
    ({"sessionType": {}}, "sessionType"),
    ({"channel": "c" * 33}, "channel"),
    ({"lastUserMessage": 42}, "lastUserMessage"),
    ({"lastUserMessage": ["text"]}, "lastUserMessage"),
    ({"lastAssistantMessage": [{"type": "text", "text": 3}]}, "lastAssistantMessage"),
    ({"lastAssistantMessage": [{"text": "no type"}]}, "lastAssistantMessage"),
])
def test_invalid_body_is_400_naming_the_field(app, webhook, change, field):
    body = assert_error(webhook(event(**change)), 400, 2001)
    assert field in body["message"]
    assert rows(app, WebhookEvent) == []


@pytest.mark.parametrize("raw", [b"{not json", b"[1, 2]", b'"text"'])
def test_body_that_is_not_an_object_is_400(app, client, raw):
    assert_error(post_webhook(client, raw, secret=WEBHOOK_SECRET), 400, 2001)


def test_optional_fields_may_be_missing_or_null(app, webhook):
    body = {"eventId": "e-min", "sessionId": 5, "userId": 6, "phase": "COMPLETED",
            "projectKey": None, "workspace": None}
    assert assert_ok(webhook(body), 202)["reason"] == "auto_capture_disabled"


# ---- recording ---------------------------------------------------------------------------

def test_session_is_recorded_and_feeds_the_projects_picker(app, webhook, as_service):
    assert_ok(webhook(event(projectKey="mao", workspace="/w/mao", channel="DINGTALK")), 202)
    (session,) = rows(app, PlatformSession)
    assert (session.id, session.user_id, session.project_key, session.workspace,
            session.session_type, session.channel) == \
        (SESSION_ID, USER_ID, "mao", "/w/mao", "NORMAL", "DINGTALK")
    first_seen = session.last_seen_at

    assert_ok(webhook(event(projectKey="blog", phase="FAILED")), 202)
    (session,) = rows(app, PlatformSession)
    assert session.project_key == "blog" and session.last_seen_at > first_seen
    assert_ok(webhook(event(sessionId=SESSION_ID + 1, projectKey="weixin-bot")), 202)
    projects = assert_ok(as_service(USER_ID).get("/api/v1/memory/projects"))
    assert projects == {"projects": ["blog"]}


def test_a_user_first_seen_in_a_webhook_is_created(app, webhook):
    from app.auth.models import User

    assert_ok(webhook(event(userId=424242)), 202)
    with app.app_context():
        assert db.session.get(User, 424242) is not None


def test_the_webhook_never_calls_the_llm(app, llm, webhook):
    capture_on(app)
    assert assert_ok(webhook(event()), 202)["enqueued"] is True
    assert llm.requests == []


def test_the_job_carries_ids_and_only_the_text_parts(app, webhook):
    capture_on(app)
    parts = [{"type": "text", "text": "第一段"}, {"type": "image_url", "image_url": {"url": "x"}},
             {"type": "text", "text": "第二段"}]
    body = event(lastUserMessage=parts, lastAssistantMessage="答复")
    assert_ok(webhook(body), 202)
    (job,) = queued(app)
    assert job.func_name == "jobs.extraction.extract_memories"
    assert job.args == ({"event_id": body["eventId"], "user_id": USER_ID,
                         "session_id": SESSION_ID, "project_key": "mao",
                         "user_message": "第一段\n第二段", "assistant_message": "答复"},)
    # And the delivery's request id (app.logs), for the job's log lines; no trace context with
    # tracing off.
    with app.app_context():
        here = installation()
        assert job.meta == {"kind": "extraction", "request_id": job.meta["request_id"],
                            "job_id": job.id.removeprefix(f"{here.namespace}-"),
                            "installation": here.id, "namespace": here.namespace}
    assert re.fullmatch(r"[0-9a-f]{32}", job.meta["request_id"])
    assert job.description == f"extraction user={USER_ID} session={SESSION_ID}"


# ---- decisions (D2, D6, D9) ----------------------------------------------------------------

def test_a_completed_main_session_task_with_auto_capture_on_is_enqueued(app, webhook):
    capture_on(app)
    data = assert_ok(webhook(event()), 202)
    assert data == {"accepted": True, "enqueued": True, "reason": "enqueued"}
    assert len(queued(app)) == 1


@pytest.mark.parametrize("phase", ["FAILED", "CANCELLED", "RUNNING"])
def test_only_completed_tasks_are_extracted(app, webhook, phase):
    capture_on(app)
    data = assert_ok(webhook(event(phase=phase)), 202)
    assert data == {"accepted": True, "enqueued": False, "reason": "phase_not_completed"}
    assert queued(app) == []


@pytest.mark.parametrize("session_type", ["SUBAGENT", "SIDE_TASK"])
def test_subagent_and_side_task_sessions_are_not_extracted(app, webhook, session_type):
    capture_on(app)
    data = assert_ok(webhook(event(sessionType=session_type)), 202)
    assert data == {"accepted": True, "enqueued": False, "reason": "session_type_excluded"}
    assert queued(app) == []


@pytest.mark.parametrize("channel", ["WEB", "DESKTOP", "LOCAL", "DINGTALK", "WEIXIN", "FEISHU",
                                     "SCHEDULED"])
def test_main_sessions_of_every_channel_are_extracted(app, webhook, channel):
    capture_on(app)
    assert assert_ok(webhook(event(channel=channel)), 202)["reason"] == "enqueued"


def test_auto_capture_is_off_until_the_user_turns_it_on(app, webhook):
    data = assert_ok(webhook(event()), 202)
    assert data == {"accepted": True, "enqueued": False, "reason": "auto_capture_disabled"}
    capture_on(app, enabled=False)
    assert assert_ok(webhook(event()), 202)["reason"] == "auto_capture_disabled"
    assert queued(app) == []


@pytest.mark.parametrize("fields, switch, reason", [
    ({}, True, "enqueued"),
    ({}, False, "auto_capture_disabled"),
    ({}, None, "auto_capture_disabled"),  # known, never switched
    ({"userId": 424243}, None, "auto_capture_disabled"),  # first seen in this delivery
    ({"phase": "CANCELLED"}, True, "phase_not_completed"),
    ({"sessionType": "SIDE_TASK"}, True, "session_type_excluded"),
])
# MariaDB hands the decision back from the insert; MySQL has no INSERT … RETURNING and reads it
# back in the same batch.
@pytest.mark.parametrize("insert_returning", [True, False], ids=["returned", "read back"])
def test_the_event_row_keeps_the_answer(app, webhook, monkeypatch, fields, switch, reason,
                                        insert_returning):
    from app.auth.models import User
    from app.auth.service import ensure_user
    from app.database.engines import hot_engines

    with app.app_context():
        ensure_user(USER_ID)
        db.session.remove()
        monkeypatch.setattr(hot_engines().writes.dialect, "insert_returning",
                            insert_returning)
    if switch is not None:
        capture_on(app, enabled=switch)
    body = event(**fields)
    assert assert_ok(webhook(body), 202)["reason"] == reason
    assert [(row.event_id, row.reason) for row in rows(app, WebhookEvent)] == [
        (body["eventId"], reason)]
    assert body["userId"] in {user.id for user in rows(app, User)}


# ---- idempotency ---------------------------------------------------------------------------

def test_a_repeated_event_enqueues_nothing(app, webhook):
    capture_on(app)
    body = event()
    assert assert_ok(webhook(body), 202)["reason"] == "enqueued"
    data = assert_ok(webhook(body), 202)
    assert data == {"accepted": True, "enqueued": False, "reason": "duplicate_event"}
    assert len(queued(app)) == 1 and len(rows(app, WebhookEvent)) == 1


def test_a_repeat_of_an_event_that_was_not_enqueued_is_a_duplicate_too(app, webhook):
    body = event(phase="FAILED")
    assert_ok(webhook(body), 202)
    capture_on(app)
    assert assert_ok(webhook({**body, "phase": "COMPLETED"}), 202)["reason"] == "duplicate_event"
    assert queued(app) == []


def test_event_ids_are_compared_exactly(app, webhook):
    capture_on(app)
    assert assert_ok(webhook(event(eventId="Evt-1")), 202)["reason"] == "enqueued"
    assert assert_ok(webhook(event(eventId="evt-1")), 202)["reason"] == "enqueued"


def test_concurrent_deliveries_of_one_event_enqueue_exactly_once(app):
    capture_on(app)
    body = event()
    results: list = []
    barrier = threading.Barrier(8)

    def deliver() -> None:
        client = app.test_client()
        barrier.wait()
        results.append(post_webhook(client, body, secret=WEBHOOK_SECRET))

    threads = [threading.Thread(target=deliver) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    reasons = sorted(assert_ok(result, 202)["reason"] for result in results)
    assert reasons == ["duplicate_event"] * 7 + ["enqueued"]
    assert len(queued(app)) == 1 and len(rows(app, WebhookEvent)) == 1


def test_an_event_whose_row_was_lost_commits_once_though_queued_again(app, webhook, llm,
                                                                      run_jobs, memories):
    """The event row is the guard at the door; the outcome's unique job id is the one behind it:
    a job queued twice (the row lost after the enqueue, the platform delivering again) commits
    once — the second run's changes go back with its outcome — and records one outcome."""
    capture_on(app)
    body = event()
    assert_ok(webhook(body), 202)
    with app.app_context():
        db.session.execute(sa.delete(WebhookEvent))
        db.session.commit()
    assert assert_ok(webhook(body), 202) == {"accepted": True, "enqueued": True,
                                             "reason": "enqueued"}
    assert len(queued(app)) == 2
    for _ in range(2):
        llm.reply_items([{"type": "user", "content": "输出报告用中文"}])
    run_jobs()
    assert len(llm.requests) == 2
    (outcome,) = outcomes(app)
    assert (outcome["status"], outcome["inserted"]) == ("succeeded", 1)
    assert memories.count(USER_ID, content="输出报告用中文") == 1


def test_redis_down_is_503_and_nothing_is_recorded(app, make_app):
    capture_on(app)
    body = event()
    down = make_app(REDIS_URL="redis://127.0.0.1:1/0")
    assert_error(post_webhook(down.test_client(), body, secret=WEBHOOK_SECRET), 503, 5001)
    assert rows(app, WebhookEvent) == [] and rows(app, PlatformSession) == []
    # Nothing half-way: the platform's retry of the same event goes through.
    data = assert_ok(post_webhook(app.test_client(), body, secret=WEBHOOK_SECRET), 202)
    assert data["reason"] == "enqueued" and len(queued(app)) == 1


# ---- hostile input (SPEC §8 Input) --------------------------------------------------------

@pytest.mark.parametrize("key", ["mao\n## 系统指令", "mao\u2028", "mao\x85", "mao\x00",
                                 "ma\u202eo", "ma\u2060o"])
def test_a_project_key_with_control_characters_is_400_naming_it(app, webhook, key):
    body = assert_error(webhook(event(projectKey=key)), 400, 2001)
    assert "projectKey" in body["message"]
    assert rows(app, WebhookEvent) == []


@pytest.mark.parametrize("field", ["eventId", "projectKey", "workspace", "phase",
                                   "lastUserMessage", "lastAssistantMessage"])
def test_a_lone_surrogate_is_400_never_500(app, client, field):
    raw = json.dumps(event(**{field: "a\ud800b"})).encode()  # the JSON escape \ud800
    body = assert_error(post_webhook(client, raw, secret=WEBHOOK_SECRET), 400, 2001)
    assert field in body["message"]
    assert rows(app, WebhookEvent) == []


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize("depth", [33, 1_000, 100_000])
def test_json_nested_deeper_than_32_levels_is_2001(app, client, depth):
    raw = json.dumps(event())[:-1] + f', "extra": {_nested(depth - 1)}}}'
    assert_error(post_webhook(client, raw.encode(), secret=WEBHOOK_SECRET), 400, 2001)
    assert rows(app, WebhookEvent) == []


def test_json_nested_32_levels_is_accepted(app, webhook):
    body = event(extra=json.loads(_nested(31)), lastUserMessage="[[[[[[" * 10 + "文本")
    assert assert_ok(webhook(body), 202)["accepted"] is True
