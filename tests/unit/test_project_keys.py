"""Project keys (SPEC §11): a key holding any Unicode default-ignorable code point is refused
(2001) wherever a key is taken — every code point of the ranges SPEC §11 lists, tried one by
one and, by hypothesis, anywhere inside any key; a key without one (nor a control character or a
lone surrogate, SPEC §8/§9) is taken as it is."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.errors import InvalidInput
from app.memory import rules

# SPEC §11 "Project keys", as listed there.
DEFAULT_IGNORABLE = [(0x00AD, 0x00AD), (0x034F, 0x034F), (0x115F, 0x1160), (0x17B4, 0x17B5),
                     (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x206F),
                     (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0),
                     (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF)]
# SPEC §8/§9: C0/C1 controls, the line and paragraph separators, bidirectional controls.
CONTROLS = [(0x00, 0x1F), (0x7F, 0x9F), (0x2028, 0x2029), (0x202A, 0x202E), (0x2066, 0x2069)]


def _in(ranges: list[tuple[int, int]], char: str) -> bool:
    return any(low <= ord(char) <= high for low, high in ranges)


def refused_by_the_spec(key: str) -> bool:
    return any(_in(DEFAULT_IGNORABLE + CONTROLS, c) or 0xD800 <= ord(c) <= 0xDFFF for c in key)


ignorable = st.one_of(*(st.integers(low, high) for low, high in DEFAULT_IGNORABLE)).map(chr)


def _refused(key: str) -> bool:
    for check in (rules.reported_project_key, rules.project_key):
        with pytest.raises(InvalidInput) as refused:
            check(key)
        assert refused.value.reason == "project_key_control_chars"
    return True


def test_every_default_ignorable_code_point_is_refused_in_a_project_key():
    for low, high in DEFAULT_IGNORABLE:
        for code in range(low, high + 1):
            assert _refused(f"ma{chr(code)}o"), hex(code)


@given(st.text(max_size=20), ignorable, st.text(max_size=20))
def test_a_default_ignorable_code_point_anywhere_in_a_key_is_refused(before, char, after):
    assert _refused(before + char + after)


@given(st.text(max_size=60))
def test_a_key_is_refused_exactly_when_the_spec_refuses_a_character_of_it(key):
    try:
        rules.reported_project_key(key)
    except InvalidInput:
        assert refused_by_the_spec(key)
    else:
        assert not refused_by_the_spec(key)


@given(st.text(st.characters(exclude_categories=("Cc", "Cs", "Cf", "Zl", "Zp")), min_size=1,
               max_size=40).filter(lambda key: not refused_by_the_spec(key) and key.strip()))
def test_a_key_of_visible_characters_is_taken_as_it_is(key):
    assert rules.reported_project_key(key) == key


def test_the_documents_pattern_names_every_default_ignorable_code_point_of_the_bmp():
    pattern = re.compile(rules.PROJECT_KEY_PATTERN)
    for low, high in DEFAULT_IGNORABLE:
        for code in range(low, min(high, 0xFFFF) + 1):
            assert pattern.match(f"ma{chr(code)}o") is None, hex(code)
    assert pattern.match("mao-项目_1.0")
