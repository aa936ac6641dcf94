"""Request JSON is never nested deeper than 32 levels (SPEC §8 Input), on every route."""

import pytest

from app.jsonbody import too_deep
from tests.conftest import assert_error


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize("depth", [33, 1_000, 100_000])
def test_a_body_nested_deeper_than_32_levels_is_2001(alice, memories, depth):
    raw = '{"scope": "USER", "content": "事实", "extra": ' + _nested(depth - 1) + "}"
    result = alice.call("POST", "/api/v1/memory", data=raw,
                        headers={"Content-Type": "application/json"})
    assert "32" in assert_error(result, 400, 2001)["message"]
    assert memories.count() == 0


def test_32_levels_are_allowed():
    assert not too_deep(_nested(32))
    assert too_deep(_nested(33))


def test_brackets_inside_strings_do_not_count():
    assert not too_deep('{"content": "' + "[{" * 50 + '\\"[" }')
