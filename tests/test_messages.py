"""What the pages tell a person (app/messages.py): a Chinese sentence for every refusal the code
can make, each saying what to do, and a fallback for every error code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app import messages
from app.envelope import ApiError, ErrorCode
from app.errors import InvalidContent, InvalidInput

APP = Path(__file__).resolve().parents[1] / "app"
# Where the code refuses: `InvalidInput("reason", …` and the like anywhere, and the reasons the
# error classes of app/errors.py give themselves (`super().__init__("reason", …`).
RAISED = re.compile(r'\b(?:InvalidInput|InvalidContent|LimitReached|UnknownModel|NotEditable|'
                    r'DomainError)\(\s*"([a-z]+(?:_[a-z]+)+)"')
BUILT_IN = re.compile(r'super\(\)\.__init__\(\s*"([a-z]+(?:_[a-z]+)+)"')
CJK = re.compile(r"[\u4e00-\u9fff]")


def _raised_reasons() -> set[str]:
    found = {reason for path in APP.rglob("*.py") for reason in RAISED.findall(path.read_text())}
    return found | set(BUILT_IN.findall((APP / "errors.py").read_text()))


def test_every_reason_the_code_refuses_with_has_a_sentence():
    reasons = _raised_reasons()
    assert {"content_empty", "memory_not_found", "project_key_bot", "model_not_found"} <= reasons
    assert reasons - set(messages.REASONS) == set()


def test_reasons_the_input_rules_will_add_already_have_a_sentence():
    assert {"content_control_chars", "project_key_control_chars"} <= set(messages.REASONS)


@pytest.mark.parametrize("sentence", [*messages.REASONS.values(), *messages.BY_CODE.values(),
                                      *(s for _, s in messages.HTTP_PAGES.values()),
                                      *messages.EXTRACTION_UNAVAILABLE_FOR_ADMIN.values(),
                                      *messages.EXTRACTION_UNAVAILABLE_FOR_USER.values()])
def test_every_sentence_is_chinese_and_says_what_to_do(sentence: str):
    assert CJK.search(sentence) and "请" in sentence, sentence


def test_empty_and_too_long_content_read_differently():
    empty = messages.sentence(InvalidContent("content_empty", "content must not be empty"))
    too_long = messages.sentence(InvalidContent("content_too_long", "content must be at most"))
    assert empty != too_long
    assert "不能为空" in empty and "超过 500 字" in too_long


def test_every_error_code_has_a_fallback_sentence_and_a_heading():
    assert set(messages.BY_CODE) == set(ErrorCode) == set(messages.HEADINGS)


def test_a_reason_without_a_sentence_falls_back_to_its_error_code():
    refusal = InvalidInput("a_rule_added_later", "some english")
    assert messages.sentence(refusal) == messages.BY_CODE[ErrorCode.PARAM_INVALID]


def test_a_refusal_of_the_web_layer_reads_by_its_code():
    refusal = ApiError(ErrorCode.FORBIDDEN, "this endpoint needs memory:read")
    assert messages.sentence(refusal) == messages.BY_CODE[ErrorCode.FORBIDDEN]
    assert messages.heading(refusal) == "没有权限"
