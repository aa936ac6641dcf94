"""Reading the model's answers: extraction candidates and consolidation plans.

Extraction (seed §5.6 step 4, §10.1 guards), `parse`:
Invalid as a whole (the run is abandoned): not JSON, not an array, more than 3 items.
Dropped alone (the others still count): not an object, unknown type, empty or > 120 code points
content for insert/update, touch/update without a usable existingId.
A missing or unknown action is an insert (the pre-D13 protocol had no actions).

Consolidation (seed §10.3), `parse_plan`: the plan of one group is all or nothing, because its
operations only make sense together (a drop is redundant *with* something kept or merged).
Any of these abandons the group, nothing changes: not JSON, not an array, an item that is not
an object with a known op and a non-empty sourceIds array of ids, a merge without content; an
id the group's input did not list (MANUAL, DISMISSED, another group's or user's, unknown); an
id named twice; a merge of fewer than 2 rows or over 120 code points; drops of every row.
Rows no operation names are kept.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from app.memory.memories import Action, Merge, Plan
from app.memory.rules import (
    EXTRACT_MAX_ITEMS,
    EXTRACTED_CONTENT_MAX,
    ID_MAX,
    MERGE_MIN_SOURCES,
    length,
    normalize,
)

_FENCE = re.compile(r"^```[A-Za-z]*[ \t]*\n?(.*?)\n?```$", re.DOTALL)


class FactType(StrEnum):
    USER = "user"
    PROJECT = "project"


class InvalidOutput(ValueError):
    """The answer breaks the protocol as a whole; `reason` goes to the outcome."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


@dataclass(frozen=True)
class Candidate:
    type: FactType
    action: Action
    existing_id: int | None
    content: str | None  # normalized; None for a touch


@dataclass(frozen=True)
class Parsed:
    candidates: list[Candidate]
    dropped: int


def _strip_fence(text: str) -> str:
    text = text.strip()
    match = _FENCE.match(text)
    return match.group(1).strip() if match else text


def _existing_id(value: Any) -> int | None:
    if isinstance(value, str) and value.isascii() and value.isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= ID_MAX:
        return None
    return value


def _content(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    content = normalize(value)
    if not content or length(content) > EXTRACTED_CONTENT_MAX:
        return None
    return content


def _candidate(item: Any) -> Candidate | None:
    if not isinstance(item, dict):
        return None
    raw_type = item.get("type")
    if not isinstance(raw_type, str) or raw_type.strip().lower() not in set(FactType):
        return None
    fact_type = FactType(raw_type.strip().lower())
    raw_action = item.get("action")
    action = Action.INSERT
    if isinstance(raw_action, str) and raw_action.strip().lower() in set(Action):
        action = Action(raw_action.strip().lower())
    if action is Action.INSERT:
        content = _content(item.get("content"))
        return None if content is None else Candidate(fact_type, action, None, content)
    existing_id = _existing_id(item.get("existingId"))
    if existing_id is None:
        return None
    if action is Action.TOUCH:
        return Candidate(fact_type, action, existing_id, None)
    content = _content(item.get("content"))
    return None if content is None else Candidate(fact_type, action, existing_id, content)


def _json_array(text: str) -> list[Any]:
    try:
        data = json.loads(_strip_fence(text))
    except (ValueError, RecursionError):
        # RecursionError: nesting deeper than the decoder goes is still just a bad answer.
        raise InvalidOutput("invalid_output", "the answer is not JSON") from None
    if not isinstance(data, list):
        raise InvalidOutput("invalid_output", "the answer is not a JSON array")
    return data


def parse(text: str) -> Parsed:
    """Candidates from the model's answer, or InvalidOutput."""
    data = _json_array(text)
    if len(data) > EXTRACT_MAX_ITEMS:
        raise InvalidOutput("too_many_items",
                            f"{len(data)} items, at most {EXTRACT_MAX_ITEMS} are allowed")
    candidates = [c for c in map(_candidate, data) if c is not None]
    return Parsed(candidates, dropped=len(data) - len(candidates))


# ---- consolidation (D15) -----------------------------------------------------------------

class Op(StrEnum):
    MERGE = "merge"
    KEEP = "keep"
    DROP = "drop"


def _operation(item: Any) -> tuple[Op, list[int], Any]:
    """(op, ids, raw content) of one item, or InvalidOutput when it breaks the protocol."""
    if not isinstance(item, dict):
        raise InvalidOutput("invalid_output", "an operation is not an object")
    raw_op = item.get("op")
    if not isinstance(raw_op, str) or raw_op.strip().lower() not in set(Op):
        raise InvalidOutput("invalid_output", "an operation has no known op")
    raw_ids = item.get("sourceIds")
    if not isinstance(raw_ids, list) or not raw_ids:
        raise InvalidOutput("invalid_output", "an operation has no sourceIds array")
    found = [_existing_id(value) for value in raw_ids]
    ids = [i for i in found if i is not None]
    if len(ids) != len(found):
        raise InvalidOutput("invalid_output", "sourceIds holds something that is not an id")
    content: Any = item.get("content")
    return Op(raw_op.strip().lower()), ids, content


def parse_plan(text: str, input_ids: Collection[int]) -> Plan:
    """The plan of one group from the model's answer, or InvalidOutput (group abandoned)."""
    operations = [_operation(item) for item in _json_array(text)]
    seen: set[int] = set()
    for _, ids, _ in operations:
        if any(i not in input_ids for i in ids):
            raise InvalidOutput("foreign_ids", "an id outside the group's input")
        if len(set(ids)) != len(ids) or seen & set(ids):
            raise InvalidOutput("duplicate_ids", "an id named twice")
        seen.update(ids)
    plan = Plan(merges=[], keeps=[], drops=[])
    for op, ids, raw_content in operations:
        if op is Op.KEEP:
            plan.keeps.extend(ids)
        elif op is Op.DROP:
            plan.drops.extend(ids)
        else:
            plan.merges.append(_merge(ids, raw_content))
    if set(plan.drops) >= set(input_ids):
        raise InvalidOutput("drops_everything", "the plan drops every row of the group")
    return plan


def _merge(ids: list[int], raw_content: Any) -> Merge:
    if len(ids) < MERGE_MIN_SOURCES:
        raise InvalidOutput("merge_single_source", "a merge names fewer than 2 rows")
    content = normalize(raw_content) if isinstance(raw_content, str) else ""
    if not content:
        raise InvalidOutput("invalid_output", "a merge has no content")
    if length(content) > EXTRACTED_CONTENT_MAX:
        # Seed §10.3: better not merged than cut short.
        raise InvalidOutput("merge_too_long", f"a merge over {EXTRACTED_CONTENT_MAX} code points")
    return Merge(tuple(ids), content)
