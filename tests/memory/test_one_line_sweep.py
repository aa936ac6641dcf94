"""The exhaustive check of `rules.one_line`'s shortcut: every character of the BMP, about a second
of CPU, so it runs with the whole suite rather than in the unit tier (tests/unit/test_rules.py
keeps the property for any text)."""

from __future__ import annotations

from app.memory import rules
from tests.unit.test_rules import _one_line_by_regex


def test_one_line_shortcut_is_the_rule_for_every_character_of_the_bmp():
    """The shortcut (a printable str with single inner spaces is left as it is) gives the rule's
    result for every character, alone, inside text, doubled and at the edges."""
    for code in range(0x10000):
        char = chr(code)
        for text in (char, f"a{char}b", f"a{char}{char}b", f" {char}", f"{char} ",
                     f"中 {char} 文"):
            assert rules.one_line(text) == _one_line_by_regex(text), hex(code)
