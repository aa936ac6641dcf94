"""Properties (hypothesis): the dedup hash and normalization, and the LLM output parser.

Pure functions, no database: each property runs a bounded number of examples.
"""

from __future__ import annotations

import hashlib
import json
import sys
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from app.extraction.parser import Candidate, FactType, InvalidOutput, parse
from app.memory.memories import Action
from app.memory.rules import (
    EXTRACT_MAX_ITEMS,
    EXTRACTED_CONTENT_MAX,
    Scope,
    dedup_hash,
    normalize,
)
from app.memory.rules import ID_MAX as MAX_ID

BOUNDED = settings(max_examples=200, deadline=None, database=None)

# Every character the rules treat as whitespace (Python's \s and str.strip agree on this set).
WHITESPACE = [chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()]
whitespace_runs = st.text(alphabet=st.sampled_from(WHITESPACE), min_size=1, max_size=6)
tokens = st.lists(
    st.text(alphabet=st.characters(exclude_characters=WHITESPACE, exclude_categories=("Cs",)),
            min_size=1, max_size=12),
    min_size=1, max_size=8)
scopes = st.sampled_from(list(Scope))
project_keys = st.one_of(st.none(), st.just(""), st.text(max_size=20))


# ---- normalization and the dedup hash ---------------------------------------------------

@BOUNDED
@given(st.text())
def test_normalize_is_idempotent(text: str) -> None:
    assert normalize(normalize(text)) == normalize(text)


@BOUNDED
@given(st.text())
def test_normalized_text_has_no_whitespace_but_single_inner_spaces(text: str) -> None:
    normalized = normalize(text)
    assert normalized == normalized.strip()
    assert "  " not in normalized
    assert all(c == " " or not c.isspace() for c in normalized)


@BOUNDED
@given(tokens, st.data(), scopes, project_keys)
def test_hash_ignores_which_whitespace_runs_separate_the_words(
        words: list[str], data: st.DataObject, scope: Scope, project_key: str | None) -> None:
    """Any whitespace runs (newlines, tabs, ideographic spaces…) between, before and after the
    words give the hash of the words joined by single spaces."""
    separators = data.draw(st.lists(whitespace_runs, min_size=len(words) + 1,
                                    max_size=len(words) + 1))
    messy = separators[0] + "".join(w + s for w, s in zip(words, separators[1:], strict=True))
    tidy = " ".join(words)
    assert normalize(messy) == tidy
    assert dedup_hash(scope, project_key, messy) == dedup_hash(scope, project_key, tidy)


@BOUNDED
@given(scopes, project_keys, st.text())
def test_hash_is_the_documented_sha1_and_stable(scope: Scope, project_key: str | None,
                                                content: str) -> None:
    """SHA-1 hex of "{scope}|{projectKey or ''}|{normalized}", the same on every call, with the
    scope given as the enum or its string."""
    expected = hashlib.sha1(
        f"{scope.value}|{project_key or ''}|{normalize(content)}".encode()).hexdigest()
    assert dedup_hash(scope, project_key, content) == expected
    assert dedup_hash(scope.value, project_key, content) == expected
    assert dedup_hash(scope, project_key, normalize(content)) == expected


def test_hash_of_a_known_memory_never_changes() -> None:
    """Pinned: stored rows are matched by this value, so it must not move between versions."""
    assert dedup_hash("PROJECT", "mao", "  测试统一用\n\tVitest  ") == \
        hashlib.sha1("PROJECT|mao|测试统一用 Vitest".encode()).hexdigest()
    assert dedup_hash("USER", None, "x") == dedup_hash("USER", "", "x") == \
        "f7fc0a676e849bb1b826125906a1d9d61e6d199f"


# ---- the LLM output parser --------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: st.lists(children, max_size=5)
    | st.dictionaries(st.text(max_size=10), children, max_size=5),
    max_leaves=25)
# Items shaped like the protocol's, with every field sometimes right and sometimes wrong, so
# many answers carry real candidates rather than being dropped whole.
protocol_items = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(["user", "project", "USER", " Project ", "team", "", 3]),
        "action": st.sampled_from(["insert", "touch", "update", "UPDATE", "delete", None, 1]),
        "existingId": st.one_of(st.integers(), st.sampled_from(["12", "0", "-3", "x", "1e3"]),
                                st.booleans(), st.none(), st.just(MAX_ID + 1)),
        "content": st.one_of(st.text(max_size=140), st.text(alphabet=" \n\t", max_size=4),
                             st.just("字" * EXTRACTED_CONTENT_MAX),
                             st.just("字" * (EXTRACTED_CONTENT_MAX + 1)), json_values),
    })
answers = st.lists(protocol_items | json_values, max_size=EXTRACT_MAX_ITEMS + 2)


def _fenced(text: str, fence: str) -> str:
    return f"```{fence}\n{text}\n```" if fence != "-" else text


def _assert_guards_hold(candidate: Candidate) -> None:
    assert isinstance(candidate.type, FactType)
    assert isinstance(candidate.action, Action)
    if candidate.action is Action.INSERT:
        assert candidate.existing_id is None
    else:
        assert type(candidate.existing_id) is int and 0 < candidate.existing_id <= MAX_ID
    if candidate.action is Action.TOUCH:
        assert candidate.content is None
    else:
        assert isinstance(candidate.content, str)
        assert candidate.content and len(candidate.content) <= EXTRACTED_CONTENT_MAX
        assert candidate.content == normalize(candidate.content)


def _parse_within_protocol(text: str) -> None:
    """parse() either refuses the whole answer with InvalidOutput, or yields at most three
    candidates that each pass every guard; nothing else ever comes out of it."""
    try:
        parsed = parse(text)
    except InvalidOutput as exc:
        assert exc.reason in ("invalid_output", "too_many_items")
        return
    assert len(parsed.candidates) <= EXTRACT_MAX_ITEMS
    assert parsed.dropped >= 0
    assert len(parsed.candidates) + parsed.dropped <= EXTRACT_MAX_ITEMS
    for candidate in parsed.candidates:
        _assert_guards_hold(candidate)


@BOUNDED
@given(json_values, st.sampled_from(["-", "json", ""]))
def test_parser_keeps_the_protocol_for_any_json(value: Any, fence: str) -> None:
    _parse_within_protocol(_fenced(json.dumps(value, ensure_ascii=False), fence))


@BOUNDED
@given(answers, st.sampled_from(["-", "json", "JSON", ""]))
def test_parser_keeps_the_protocol_for_protocol_shaped_answers(items: list[Any],
                                                               fence: str) -> None:
    _parse_within_protocol(_fenced(json.dumps(items, ensure_ascii=False), fence))


@BOUNDED
@given(st.text())
def test_parser_keeps_the_protocol_for_any_text(text: str) -> None:
    _parse_within_protocol(text)


@BOUNDED
@given(st.lists(protocol_items, min_size=EXTRACT_MAX_ITEMS + 1, max_size=8))
def test_parser_refuses_more_than_three_items_whole(items: list[Any]) -> None:
    try:
        parse(json.dumps(items))
    except InvalidOutput as exc:
        assert exc.reason == "too_many_items"
    else:
        raise AssertionError("an answer with more than 3 items was accepted")
