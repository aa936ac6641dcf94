"""Reading the model's answer into candidates (seed §5.6 step 4, §10.1 guards).

Invalid as a whole (the run is abandoned): not JSON, not an array, more than 3 items.
Dropped alone (the others still count): not an object, unknown type, empty or > 120 code points
content for insert/update, touch/update without a usable existingId.
A missing or unknown action is an insert (the pre-D13 protocol had no actions).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from app.memory.rules import EXTRACT_MAX_ITEMS, EXTRACTED_CONTENT_MAX, length, normalize

_FENCE = re.compile(r"^```[A-Za-z]*[ \t]*\n?(.*?)\n?```$", re.DOTALL)
MAX_ID = 2**63 - 1


class Action(StrEnum):
    INSERT = "insert"
    TOUCH = "touch"
    UPDATE = "update"


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
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_ID:
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


def parse(text: str) -> Parsed:
    """Candidates from the model's answer, or InvalidOutput."""
    try:
        data = json.loads(_strip_fence(text))
    except ValueError:
        raise InvalidOutput("invalid_output", "the answer is not JSON") from None
    if not isinstance(data, list):
        raise InvalidOutput("invalid_output", "the answer is not a JSON array")
    if len(data) > EXTRACT_MAX_ITEMS:
        raise InvalidOutput("too_many_items",
                            f"{len(data)} items, at most {EXTRACT_MAX_ITEMS} are allowed")
    candidates = [c for c in map(_candidate, data) if c is not None]
    return Parsed(candidates, dropped=len(data) - len(candidates))
