"""Scores: what one case changed against what it expected, and the figures of a whole run.

Pure functions of the cases and the observed changes, so equal answers give equal scores. The
figures (README, "Measuring memory quality"):

- decision accuracy: cases whose answer was usable and whose changes are exactly the expected
  ones (every `expect` effect, nothing outside `expect` + `optional`);
- stored precision: rows written (inserted or rewritten) that say an expected effect / all rows
  written; stored recall: expected inserts and updates that were written / all of them;
- junk rate: of the cases put to the model where nothing should be stored, those where
  something was;
- duplicate rate: of the cases that expect a touch or an update, those where a new row was
  inserted that no expected insert accounts for;
- DISMISSED violations: cases that wrote something a DISMISSED row says, or changed such a row;
  MANUAL violations: cases that changed a MANUAL row in any way (words, status or time);
- invalid-output rate: model answers the pipeline abandoned as invalid / model calls;
- tokens per case and latency p50/p95: over the cases that called the model.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from bench.quality.cases import Case, Effect, says

# What became of a case's model call (or why there was none).
ANSWERED = "answered"  # a usable answer, applied by the domain rules
SKIPPED = "skipped"  # no model call: D11 (too short) or nothing to extract from
INVALID = "invalid"  # the answer broke the protocol: the run was abandoned
TIMEOUT = "timeout"
ERROR = "error"  # the endpoint failed or refused, after the retries
USABLE = (ANSWERED, SKIPPED)


@dataclass(frozen=True)
class Stored:
    scope: str
    project_key: str
    content: str


@dataclass(frozen=True)
class Observation:
    """What one case did, read back from the database after the extraction."""

    case_id: str
    status: str
    reason: str = ""
    called: bool = False
    inserted: tuple[Stored, ...] = ()
    touched: tuple[str, ...] = ()  # refs of seeded rows whose time moved, words unchanged
    updated: tuple[tuple[str, str], ...] = ()  # (ref, new words)
    changed: tuple[str, ...] = ()  # refs of seeded rows changed in any way
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_s: float | None = None


@dataclass(frozen=True)
class CaseScore:
    case_id: str
    kind: str
    expected: str
    status: str
    correct: bool
    stored: int  # rows written
    stored_right: int  # of which say an expected effect
    expected_stored: int  # required inserts and updates
    recalled: int  # of which were written
    junk: bool | None  # None: the case expects something
    duplicate: bool | None  # None: the case expects no touch or update
    dismissed_violation: bool
    manual_violation: bool
    reason: str = ""  # the outcome's reason (e.g. user_message_too_short, invalid_output)
    changes: tuple[str, ...] = ()  # what the case changed, to read why it scored as it did


def _changes(seen: Observation) -> tuple[str, ...]:
    return (tuple(f"insert {row.scope}: {row.content}" for row in seen.inserted)
            + tuple(f"touch {ref}" for ref in seen.touched)
            + tuple(f"update {ref}: {words}" for ref, words in seen.updated))


def _insert_fits(effect: Effect, row: Stored) -> bool:
    return row.scope in effect.scopes and says(row.content, effect.match)


def _update_fits(effect: Effect, ref: str, content: str) -> bool:
    return effect.ref == ref and (not effect.match or says(content, effect.match))


def _take(effects: Sequence[Effect], items: list[Any], fits: Any) -> int:
    """Pair each effect with the first unpaired item it fits (removed from `items`); how many
    effects were paired. In order, so the pairing is the same for the same answers."""
    paired = 0
    for effect in effects:
        for index, item in enumerate(items):
            if fits(effect, item):
                del items[index]
                paired += 1
                break
    return paired


def score_case(case: Case, seen: Observation) -> CaseScore:
    """One case's observed changes against its expectation."""
    def of(effects: Sequence[Effect], action: str) -> list[Effect]:
        return [e for e in effects if e.action == action]

    inserts = list(seen.inserted)
    updates = list(seen.updated)
    got_inserts = _take(of(case.expect, "insert"), inserts, _insert_fits)
    got_updates = _take(of(case.expect, "update"), updates,
                        lambda e, u: _update_fits(e, *u))
    optional_writes = (_take(of(case.optional, "insert"), inserts, _insert_fits)
                       + _take(of(case.optional, "update"), updates,
                               lambda e, u: _update_fits(e, *u)))
    required_touches = {e.ref for e in of(case.expect, "touch")}
    allowed_touches = required_touches | {e.ref for e in of(case.optional, "touch")}
    touches_ok = required_touches <= set(seen.touched) <= allowed_touches

    expected_stored = len(of(case.expect, "insert")) + len(of(case.expect, "update"))
    recalled = got_inserts + got_updates
    stored = len(seen.inserted) + len(seen.updated)
    correct = (seen.status in USABLE and recalled == expected_stored and touches_ok
               and not inserts and not updates)

    # Junk is the model's: a case under the D11 threshold is never put to it.
    no_effects = not case.expect and not case.optional and case.kind != "short"
    expects_match = any(e.action in ("touch", "update") for e in case.expect)
    written = [row.content for row in seen.inserted] + [words for _, words in seen.updated]
    dismissed = [m for m in case.memories if m.status == "DISMISSED"]
    manual = {m.ref for m in case.memories if m.source == "MANUAL"}
    return CaseScore(
        case_id=case.id, kind=case.kind, expected=case.decision, status=seen.status,
        correct=correct, stored=stored, stored_right=recalled + optional_writes,
        expected_stored=expected_stored, recalled=recalled,
        junk=(stored > 0) if no_effects else None,
        # `inserts` holds the inserted rows no expected or optional insert accounts for.
        duplicate=bool(inserts) if expects_match else None,
        dismissed_violation=any(m.ref in seen.changed for m in dismissed) or any(
            m.match and says(words, m.match) for m in dismissed for words in written),
        manual_violation=bool(manual & set(seen.changed)),
        reason=seen.reason, changes=_changes(seen),
    )


def _ratio(part: int, whole: int) -> float | None:
    return None if whole == 0 else part / whole


def percentile(values: Sequence[float], p: float) -> float | None:
    """Nearest-rank percentile (no interpolation: one of the values, the same every time)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def _mean(values: Sequence[int | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


@dataclass(frozen=True)
class Scores:
    model: str
    cases: int
    calls: int
    decision_accuracy: float | None
    stored_precision: float | None
    stored_recall: float | None
    junk_rate: float | None
    duplicate_rate: float | None
    dismissed_violations: int
    manual_violations: int
    invalid_output_rate: float | None
    failure_rate: float | None  # timeouts and endpoint errors / calls
    prompt_tokens_per_case: float | None
    completion_tokens_per_case: float | None
    latency_p50_s: float | None
    latency_p95_s: float | None
    accuracy_by_kind: dict[str, float]
    per_case: tuple[CaseScore, ...]

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["per_case"] = [asdict(score) for score in self.per_case]
        return data


def summarize(model: str, cases: Sequence[Case],
              observations: Sequence[Observation]) -> Scores:
    """The scores of one model's run over `cases` (observations in any order, one per case)."""
    seen = {o.case_id: o for o in observations}
    missing = [c.id for c in cases if c.id not in seen]
    if missing:
        raise ValueError(f"no observation for {len(missing)} cases, e.g. {missing[0]}")
    scores = tuple(score_case(c, seen[c.id]) for c in cases)
    called = [seen[c.id] for c in cases if seen[c.id].called]
    junk = [s.junk for s in scores if s.junk is not None]
    duplicates = [s.duplicate for s in scores if s.duplicate is not None]
    kinds: dict[str, list[bool]] = {}
    for s in scores:
        kinds.setdefault(s.kind, []).append(s.correct)
    return Scores(
        model=model, cases=len(scores), calls=len(called),
        decision_accuracy=_ratio(sum(s.correct for s in scores), len(scores)),
        stored_precision=_ratio(sum(s.stored_right for s in scores),
                                sum(s.stored for s in scores)),
        stored_recall=_ratio(sum(s.recalled for s in scores),
                             sum(s.expected_stored for s in scores)),
        junk_rate=_ratio(sum(junk), len(junk)),
        duplicate_rate=_ratio(sum(duplicates), len(duplicates)),
        dismissed_violations=sum(s.dismissed_violation for s in scores),
        manual_violations=sum(s.manual_violation for s in scores),
        invalid_output_rate=_ratio(sum(o.status == INVALID for o in called), len(called)),
        failure_rate=_ratio(sum(o.status in (TIMEOUT, ERROR) for o in called), len(called)),
        prompt_tokens_per_case=_mean([o.prompt_tokens for o in called]),
        completion_tokens_per_case=_mean([o.completion_tokens for o in called]),
        latency_p50_s=percentile([o.latency_s for o in called if o.latency_s is not None], 50),
        latency_p95_s=percentile([o.latency_s for o in called if o.latency_s is not None], 95),
        accuracy_by_kind={kind: sum(ok) / len(ok) for kind, ok in sorted(kinds.items())},
        per_case=scores,
    )
