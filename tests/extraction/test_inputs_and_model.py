"""What reaches the model, and which model (seed §5.6: D8, D9, D10, D11)."""

from __future__ import annotations

import logging

import pytest
import sqlalchemy as sa

from app.extensions import db
from app.system import service as system
from app.system.models import EXTRACTION_MODEL_KEY, LlmModel, SystemSetting
from tests.completions import SESSION_ID, USER_ID, capture_on, event, outcomes
from tests.conftest import assert_ok


def test_a_completed_task_ends_as_memory_rows(app, extract, llm, memories, as_service):
    outcome = extract([{"type": "user", "action": "insert", "content": "输出报告用中文"},
                       {"type": "project", "content": "仓库统一用 pnpm 管理依赖"}])
    assert outcome["status"] == "succeeded" and outcome["reason"] == "applied"
    assert (outcome["inserted"], outcome["touched"], outcome["updated"], outcome["dropped"],
            outcome["demoted"]) == (2, 0, 0, 0, 0)
    assert outcome["model"] == "scripted-default" and outcome["attempts"] == 1
    assert (outcome["promptTokens"], outcome["completionTokens"], outcome["totalTokens"]) == \
        (321, 12, 333)
    (request,) = llm.requests
    assert outcome["promptChars"] == sum(len(m["content"]) for m in request.messages)

    page = assert_ok(as_service(USER_ID).get("/api/v1/memory"))
    rows = {r["content"]: r for r in page["records"]}
    assert set(rows) == {"输出报告用中文", "仓库统一用 pnpm 管理依赖"}
    assert (rows["输出报告用中文"]["scope"], rows["输出报告用中文"]["projectKey"]) == ("USER", None)
    assert (rows["仓库统一用 pnpm 管理依赖"]["scope"],
            rows["仓库统一用 pnpm 管理依赖"]["projectKey"]) == ("PROJECT", "mao")
    for row in rows.values():
        assert (row["source"], row["status"], row["originSessionId"]) == \
            ("AUTO", "ACTIVE", SESSION_ID)
    context = assert_ok(as_service().get(f"/api/v1/internal/memory/context?userId={USER_ID}"
                                         "&projectKey=mao"))
    assert "- [项目:mao] 仓库统一用 pnpm 管理依赖" in context["prompt"]


def test_extracted_content_is_stored_normalized(extract, memories):
    extract([{"type": "user", "content": "  输出报告\n\n用   中文 "}])
    assert memories.count(USER_ID, content="输出报告 用 中文") == 1


def test_toggle_is_rechecked_when_the_job_runs(app, llm, webhook, run_jobs):
    capture_on(app)
    assert assert_ok(webhook(event()), 202)["enqueued"] is True
    capture_on(app, enabled=False)
    run_jobs()
    assert [(o["status"], o["reason"]) for o in outcomes(app)] == \
        [("skipped", "auto_capture_disabled")]
    assert llm.requests == []


def test_only_text_parts_reach_the_model(extract, llm):
    user = [{"type": "text", "text": "以后所有的报告都请用中文来写,谢谢"},
            {"type": "image_url", "image_url": {"url": "https://img.example/secret.png"}},
            {"type": "text", "text": "第二段文字"}]
    assistant = [{"type": "text", "text": "好的"}, {"type": "file", "file": {"name": "a.pdf"}}]
    extract([], lastUserMessage=user, lastAssistantMessage=assistant)
    prompt = llm.requests[0].prompt
    assert "以后所有的报告都请用中文来写,谢谢\n第二段文字" in prompt and "好的" in prompt
    assert "img.example" not in prompt and "a.pdf" not in prompt


def test_each_side_is_cut_to_6000_code_points(extract, llm):
    extract([], lastUserMessage="甲" * 7000, lastAssistantMessage="乙" * 6500)
    prompt = llm.requests[0].prompt
    assert prompt.count("甲") == 6000 and prompt.count("乙") == 6000


# 19 code points once whitespace runs are folded (the raw text is longer).
NINETEEN = "一二三四五   六七八九十\n\n\t一二三四五六七"
TWENTY = NINETEEN + "八"


def test_a_user_message_under_20_code_points_skips_without_an_llm_call(extract, llm):
    outcome = extract(None, lastUserMessage=NINETEEN)
    assert (outcome["status"], outcome["reason"]) == ("skipped", "user_message_too_short")
    assert outcome["model"] is None and llm.requests == []


def test_a_user_message_of_20_code_points_is_extracted(extract, llm):
    assert extract([], lastUserMessage=TWENTY)["status"] == "succeeded"
    assert len(llm.requests) == 1


@pytest.mark.parametrize(("user", "assistant"), [
    (None, "答复"),
    ("这是一条足够长的用户消息,超过二十个字符了吧", None),
    ("这是一条足够长的用户消息,超过二十个字符了吧", "   \n "),
    ("这是一条足够长的用户消息,超过二十个字符了吧", [{"type": "image_url", "image_url": {}}]),
    ([], "答复"),
])
def test_a_missing_side_skips_without_an_llm_call(extract, llm, user, assistant):
    outcome = extract(None, lastUserMessage=user, lastAssistantMessage=assistant)
    assert (outcome["status"], outcome["reason"]) == ("skipped", "missing_message")
    assert llm.requests == []


def _set_model_setting(app, value: str) -> None:
    with app.app_context():
        db.session.get(SystemSetting, EXTRACTION_MODEL_KEY).value = value
        db.session.commit()


def _add_model(app, name: str, model: str, **options) -> int:
    with app.app_context():
        return system.add_model(name, model, **options).id


def test_the_configured_model_is_requested(app, extract, llm):
    model_id = _add_model(app, "cheap", "configured-model", base_url=llm.base_url)
    with app.app_context():
        system.put_setting(EXTRACTION_MODEL_KEY, str(model_id))
    assert extract([])["model"] == "configured-model"
    assert llm.requests[0].model == "configured-model"


def test_the_default_model_is_requested_when_none_is_configured(extract, llm):
    assert extract([])["model"] == "scripted-default"
    assert llm.requests[0].model == "scripted-default"


def _one_warning_without_traceback(caplog, reason: str) -> None:
    warnings = [r for r in caplog.records
                if r.name.startswith("app.") and r.levelno >= logging.WARNING]
    assert [f"reason={reason}" in r.getMessage() for r in warnings] == [True]
    assert warnings[0].exc_info is None


def test_an_unknown_model_id_falls_back_to_the_default(app, extract, llm):
    _set_model_setting(app, "987654")
    assert extract([])["model"] == "scripted-default"
    assert llm.requests[0].model == "scripted-default"


def test_without_any_model_the_job_is_skipped_with_one_warning(app, extract, llm, caplog):
    with app.app_context():
        db.session.execute(sa.delete(LlmModel))
        db.session.commit()
    outcome = extract(None)
    assert (outcome["status"], outcome["reason"]) == ("skipped", "no_model")
    assert llm.requests == []
    _one_warning_without_traceback(caplog, "no_model")


def test_a_model_without_endpoint_or_key_uses_the_openai_environment(app, extract, llm):
    model_id = _add_model(app, "env", "env-model")
    _set_model_setting(app, str(model_id))
    extract([])
    (request,) = llm.requests
    assert request.model == "env-model"
    assert request.headers["authorization"] == "Bearer test-openai-key"


def test_a_model_names_the_variable_holding_its_key(app, extract, llm, monkeypatch):
    monkeypatch.setenv("CHEAP_LLM_API_KEY", "key-from-its-own-variable")
    model_id = _add_model(app, "own-key", "own-key-model", base_url=llm.base_url,
                          api_key_env="CHEAP_LLM_API_KEY")
    _set_model_setting(app, str(model_id))
    extract([])
    assert llm.requests[0].headers["authorization"] == "Bearer key-from-its-own-variable"


def test_a_model_whose_key_variable_is_unset_skips_the_job_with_one_warning(
        app, extract, llm, monkeypatch, caplog):
    monkeypatch.delenv("UNSET_LLM_API_KEY", raising=False)
    model_id = _add_model(app, "no-key", "no-key-model", base_url=llm.base_url,
                          api_key_env="UNSET_LLM_API_KEY")
    _set_model_setting(app, str(model_id))
    outcome = extract(None)
    assert (outcome["status"], outcome["reason"]) == ("skipped", "llm_api_key_missing")
    assert llm.requests == []
    _one_warning_without_traceback(caplog, "llm_api_key_missing")
