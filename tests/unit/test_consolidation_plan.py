"""Reading a consolidation answer (`parser.parse_plan`, seed §10.3): the whole catalogue of
answers that abandon a group, checked on the function itself. The job tests run the main ones
through the worker and show that an abandoned group stays exactly as it was."""

from __future__ import annotations

import json

import pytest

from app.extraction.parser import InvalidOutput, parse_plan
from app.memory.memories import Merge, Plan

INPUT = {11, 12, 13, 14}


def plan(answer) -> Plan:
    return parse_plan(answer if isinstance(answer, str) else json.dumps(answer), INPUT)


def refused(answer) -> str:
    with pytest.raises(InvalidOutput) as caught:
        plan(answer)
    return caught.value.reason


def test_merge_keep_and_drop_are_read_with_normalized_content():
    read = plan([{"op": "merge", "sourceIds": [11, 12], "content": "  报告\n用 中文 "},
                 {"op": "KEEP", "sourceIds": [13]}, {"op": " drop ", "sourceIds": [14]}])
    assert read == Plan(merges=[Merge((11, 12), "报告 用 中文")], keeps=[13], drops=[14])
    assert read.referenced == [11, 12, 13, 14] and read.changes_anything


@pytest.mark.parametrize("answer", [
    '```json\n[{"op": "drop", "sourceIds": [14]}]\n```',
    '```\n[{"op": "drop", "sourceIds": [14]}]\n```',
    '  ```JSON\n[{"op": "drop", "sourceIds": [14]}]```  ',
])
def test_a_fenced_json_answer_is_accepted(answer):
    assert plan(answer).drops == [14]


def test_ids_given_as_digits_are_accepted():
    assert plan([{"op": "merge", "sourceIds": ["11", "12"], "content": "合并"}]).merges == \
        [Merge((11, 12), "合并")]


def test_extra_fields_are_ignored():
    assert plan([{"op": "keep", "sourceIds": [11], "content": "不需要", "why": "重复"}]).keeps \
        == [11]


@pytest.mark.parametrize("answer", [[], [{"op": "keep", "sourceIds": [11, 12, 13, 14]}]])
def test_a_plan_without_merges_or_drops_changes_nothing(answer):
    assert not plan(answer).changes_anything


def test_a_merge_of_120_code_points_is_accepted_and_121_is_not():
    assert plan([{"op": "merge", "sourceIds": [11, 12], "content": "长" * 120}]).merges
    assert refused([{"op": "merge", "sourceIds": [11, 12], "content": "长" * 121}]) == \
        "merge_too_long"


def test_one_over_long_merge_refuses_the_whole_plan():
    assert refused([{"op": "merge", "sourceIds": [11, 12], "content": "短的"},
                    {"op": "merge", "sourceIds": [13, 14], "content": "长" * 121}]) == \
        "merge_too_long"


def test_a_merge_needs_two_sources():
    assert refused([{"op": "merge", "sourceIds": [11], "content": "改写"}]) == \
        "merge_single_source"


@pytest.mark.parametrize("ids", [[11, 99], [0], [-12], [2**64]])
def test_an_id_outside_the_input_refuses_the_plan(ids):
    reason = refused([{"op": "drop", "sourceIds": ids}])
    assert reason == ("foreign_ids" if ids == [11, 99] else "invalid_output")


@pytest.mark.parametrize("answer", [
    [{"op": "merge", "sourceIds": [11, 11, 12], "content": "合并"}],
    [{"op": "merge", "sourceIds": [11, 12], "content": "合并"}, {"op": "drop", "sourceIds": [12]}],
    [{"op": "keep", "sourceIds": [13]}, {"op": "keep", "sourceIds": ["13"]}],
])
def test_an_id_named_twice_refuses_the_plan(answer):
    assert refused(answer) == "duplicate_ids"


def test_dropping_every_row_refuses_the_plan():
    assert refused([{"op": "drop", "sourceIds": [11, 12]},
                    {"op": "drop", "sourceIds": [13, 14]}]) == "drops_everything"


@pytest.mark.parametrize("answer", [
    pytest.param("好的,以下是整理结果", id="prose"),
    pytest.param('{"op": "drop", "sourceIds": [14]}', id="object"),
    pytest.param("null", id="null"),
    pytest.param('[{"op": "drop", "sourceIds": [14]}', id="truncated"),
    pytest.param([{"op": "rewrite", "sourceIds": [11, 12], "content": "改写"}], id="unknown-op"),
    pytest.param([{"op": None, "sourceIds": [14]}], id="op-null"),
    pytest.param([{"sourceIds": [14]}], id="no-op"),
    pytest.param([{"op": "drop", "sourceIds": 14}], id="ids-not-array"),
    pytest.param([{"op": "drop", "sourceIds": []}], id="no-ids"),
    pytest.param([{"op": "drop"}], id="ids-missing"),
    pytest.param([{"op": "drop", "sourceIds": ["abc"]}], id="not-an-id"),
    pytest.param([{"op": "drop", "sourceIds": [True]}], id="boolean-id"),
    pytest.param([{"op": "drop", "sourceIds": [12.5]}], id="fractional-id"),
    pytest.param([{"op": "merge", "sourceIds": [11, 12]}], id="merge-no-content"),
    pytest.param([{"op": "merge", "sourceIds": [11, 12], "content": " \n "}],
                 id="merge-blank"),
    pytest.param([{"op": "merge", "sourceIds": [11, 12], "content": 42}], id="merge-number"),
    pytest.param([{"op": "drop", "sourceIds": [14]}, "keep"], id="item-not-object"),
])
def test_an_answer_that_breaks_the_protocol_refuses_the_plan(answer):
    assert refused(answer) == "invalid_output"
