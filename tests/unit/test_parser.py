"""The output parsers as pure functions: whatever the model sends, only InvalidOutput escapes."""

import pytest

from app.extraction.parser import InvalidOutput, parse, parse_plan

DEEPLY_NESTED = "[" * 100_000 + "]" * 100_000


def test_deeply_nested_extraction_answer_is_invalid_output_not_a_crash():
    with pytest.raises(InvalidOutput):
        parse(DEEPLY_NESTED)


def test_deeply_nested_consolidation_answer_is_invalid_output_not_a_crash():
    with pytest.raises(InvalidOutput):
        parse_plan(DEEPLY_NESTED, {1, 2, 3})
