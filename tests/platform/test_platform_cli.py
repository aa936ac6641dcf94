"""`flask --app wsgi platform complete`: a completion event sent to a running service exactly as
a platform sends it (SPEC §5), the service answering over real HTTP from a thread."""

from __future__ import annotations

import json

import pytest

from app.platform import credentials
from tests.completions import USER_ID, capture_on, only_outcome
from tests.conftest import SERVICE_TOKEN, assert_ok
from tests.serving import in_thread

USER_MESSAGE = "以后报告都用中文写,我们这个仓库统一用 pnpm 管理依赖"
ANSWER = "好的,报告已用中文写好,依赖也改用 pnpm 安装了。"


@pytest.fixture
def live(app):
    with in_thread(app) as url:
        yield url


def _complete(runner, url: str, *options: str):
    return runner.invoke(args=["platform", "complete", str(USER_ID), "--project", "mao",
                               "--user-message", USER_MESSAGE, "--answer", ANSWER,
                               "--url", url, *options])


def _answer(output: str) -> dict:
    """The service's answer: the last line the command printed."""
    return json.loads(output.rstrip("\n").splitlines()[-1])


def test_platform_complete_sends_a_signed_event_the_service_learns_from(app, runner, live, llm,
                                                                        run_jobs, as_service):
    capture_on(app)
    llm.reply_items([{"type": "user", "content": "输出报告用中文"}])
    result = _complete(runner, live, "--session-id", "555", "--event-id", "evt-by-hand")

    assert result.exit_code == 0, result.output
    assert "HTTP 202\n" in result.output
    assert _answer(result.output)["data"] == {"accepted": True, "enqueued": True,
                                              "reason": "enqueued"}
    run_jobs()
    outcome = only_outcome(app)
    assert (outcome["eventId"], outcome["sessionId"], outcome["status"]) == \
        ("evt-by-hand", 555, "succeeded")
    context = assert_ok(as_service().get(
        f"/api/v1/internal/memory/context?userId={USER_ID}&projectKey=mao"))
    assert "- [用户] 输出报告用中文" in context["prompt"]
    # The platform's own session list now knows the project.
    projects = assert_ok(as_service(USER_ID).get("/api/v1/memory/projects"))
    assert projects == {"projects": ["mao"]}


def test_platform_complete_repeats_an_event_id_as_a_platform_retry(app, runner, live):
    first = _complete(runner, live, "--event-id", "evt-retried")
    again = _complete(runner, live, "--event-id", "evt-retried")
    assert _answer(first.output)["data"]["reason"] == "auto_capture_disabled"
    assert _answer(again.output)["data"]["reason"] == "duplicate_event"


def test_platform_complete_exits_non_zero_on_a_refusal(make_app, live):
    stranger = make_app(MEMORY_WEBHOOK_SECRET="not-the-service-secret")
    result = _complete(stranger.test_cli_runner(), live)
    assert result.exit_code == 1
    assert "HTTP 401\n" in result.output
    assert _answer(result.output)["code"] == 1001


def test_platform_complete_signs_with_the_secret_serve_generated(app, make_app, tmp_path):
    """Outside production, with MEMORY_WEBHOOK_SECRET unset, the command uses the secret
    `serve` keeps in instance/ — the one the running service then checks."""
    generated, _ = credentials.load_or_create(str(tmp_path))
    app.config["MEMORY_WEBHOOK_SECRET"] = generated["MEMORY_WEBHOOK_SECRET"]
    sender = make_app(MEMORY_WEBHOOK_SECRET=None, MEMORY_SERVICE_TOKEN=SERVICE_TOKEN)
    sender.instance_path = str(tmp_path)
    with in_thread(app) as url:
        result = _complete(sender.test_cli_runner(), url)
    assert result.exit_code == 0, result.output
    assert "HTTP 202\n" in result.output


def test_platform_complete_without_a_secret_says_where_to_find_one(make_app, tmp_path):
    sender = make_app(MEMORY_WEBHOOK_SECRET=None)
    sender.instance_path = str(tmp_path)
    result = _complete(sender.test_cli_runner(), "http://127.0.0.1:1")
    assert result.exit_code != 0
    assert "MEMORY_WEBHOOK_SECRET is unset" in result.output


def test_platform_complete_reports_a_service_that_does_not_answer(runner):
    result = _complete(runner, "http://127.0.0.1:1")
    assert result.exit_code != 0
    assert "no answer from http://127.0.0.1:1" in result.output
