"""The output parsers as pure functions: whatever the model sends, only InvalidOutput escapes."""

import pytest

from app.extraction.parser import InvalidOutput, parse, parse_plan

DEEPLY_NESTED = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize("parser", [parse, parse_plan])
def test_deeply_nested_answer_is_invalid_output_not_a_crash(parser):
    with pytest.raises(InvalidOutput):
        parser(DEEPLY_NESTED)
