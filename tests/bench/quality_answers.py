"""Scripted answers for the labelled set, from its labels: the perfect answer, and the
adversaries a benchmark worth trusting must rank below its baselines. Ids are the seeded rows'
ids on a fresh database: every case's memories in case order, from 1."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from bench.quality.cases import Case, Effect

NEGATION = {"zh": "不要", "en": "never"}
INVERSION = {"zh": "用户不希望:", "en": "User does NOT want: "}


def seeded_ids(cases: Sequence[Case]) -> dict[str, dict[str, int]]:
    ids: dict[str, dict[str, int]] = {}
    next_id = 1
    for case in cases:
        ids[case.id] = {m.ref: next_id + i for i, m in enumerate(case.memories)}
        next_id += len(case.memories)
    return ids


def words(case: Case, effect: Effect, *, inverted: bool = False) -> str:
    """The effect worded from the first keyword of each group, in its polarity (or the
    opposite)."""
    said = " ".join(group[0] for group in effect.must)
    negative = effect.polarity == "-"
    if negative != inverted:
        return f"{NEGATION[case.lang]} {said}" if negative else f"{INVERSION[case.lang]}{said}"
    return said


def _item(case: Case, effect: Effect, ids: dict[str, int], *, inverted: bool = False) -> dict:
    if effect.action == "insert":
        project = effect.scopes[0] == "PROJECT" or case.kind == "no_project_key"
        return {"type": "project" if project else "user",
                "content": words(case, effect, inverted=inverted)}
    memory = case.refs[effect.ref]
    item = {"type": memory.scope.lower(), "action": effect.action,
            "existingId": ids[effect.ref]}
    if effect.action == "update" or inverted:
        item["action"] = "update"
        item["content"] = (f"{memory.content}; {words(case, effect, inverted=inverted)}"
                           if effect.must else f"{INVERSION[case.lang]}{memory.content}")
    return item


def ideal(case: Case, ids: dict[str, int]) -> str:
    """What a perfect model answers: each expected effect (a project fact of a session without
    a valid key as type=project: the pipeline must store it as USER)."""
    return json.dumps([_item(case, e, ids) for e in case.expect], ensure_ascii=False)


def inverted(case: Case, ids: dict[str, int]) -> str:
    """The expected effects with their meaning turned round: "does NOT want" for a wish, the
    wish for a "never", a known row rewritten as its opposite instead of confirmed."""
    return json.dumps([_item(case, e, ids, inverted=True) for e in case.expect],
                      ensure_ascii=False)


def duplicates(case: Case, ids: dict[str, int]) -> str:
    """Every fact inserted twice over: a new row where a known one should be confirmed or
    rewritten, and each new fact said twice."""
    items = []
    for effect in case.expect:
        if effect.action == "insert":
            item = _item(case, effect, ids)
            items += [item, {**item, "content": f"{item['content']} (again)"}]
        else:
            memory = case.refs[effect.ref]
            items.append({"type": memory.scope.lower(), "content": f"{memory.content} (again)"})
    return json.dumps(items[:3], ensure_ascii=False)


def do_nothing(case: Case, ids: dict[str, int]) -> str:
    return "[]"


def echo(case: Case, ids: dict[str, int]) -> str:
    return json.dumps([{"type": "user", "content": case.user[:120]}], ensure_ascii=False)


def over_long(case: Case, ids: dict[str, int]) -> str:
    """Junk the parser drops: one item over the 120-character limit."""
    return json.dumps([{"type": "user", "content": "记住:" + case.user * 4 + "x" * 130}],
                      ensure_ascii=False)


def invalid_json(case: Case, ids: dict[str, int]) -> str:
    return "Sure! The user prefers: " + case.user[:40]


ANSWERS: dict[str, Callable[[Case, dict[str, int]], str]] = {
    "do-nothing": do_nothing, "echo": echo, "inverted": inverted,
    "duplicates": duplicates, "over-long": over_long, "invalid-json": invalid_json,
}
