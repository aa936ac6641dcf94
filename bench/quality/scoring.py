"""Scores: what one case changed against what it expected, and the figures of a whole run.

Pure functions of the cases and the observed changes (and, when a judge model is used, of its
cached verdicts), so equal answers give equal scores. The figures (docs/quality.md):

- headline: decision accuracy over the cases put to the model (a case under the D11 threshold
  never is, so it is no score): the answer was usable and changed exactly what was expected —
  every `expect` effect said (`cases.verdict`), nothing outside `expect` + `optional`, no
  forbidden or dismissed words. An invalid answer or a failed call is a wrong decision;
- rates of the answers themselves (junk, duplicates — a new row restating one that should have
  been touched or rewritten —, stored precision) over usable answers only;
  invalid answers, failed calls, items the parser dropped (over 120 characters, …), references
  the service refused and stray touches are counted apart;
- written rows are paired with expected effects by a maximum matching (expected effects first,
  then optional ones), so the pairing does not depend on the order of the answer;
- HaluMem-style: extraction precision / recall / F1, update accuracy, false memories;
- service guarantees, which must read 0 whatever the model answers: a DISMISSED row changed
  (D3), a MANUAL row changed — its words or status, or its time without the answer repeating
  its exact words (seed §5.6 lets an exact-hash hit refresh `updated_at`) —, more ACTIVE rows
  than the cap (D14).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from app.memory import rules
from bench.quality.cases import (
    INVERTED,
    MISSING,
    MUST_NOT,
    ONE_OFF_DETAIL,
    RAW_MESSAGE,
    Case,
    Effect,
    folded,
    raw_copy,
    says,
    verdict,
)

# What became of a case's model call (or why there was none).
ANSWERED = "answered"  # a usable answer, applied by the domain rules
SKIPPED = "skipped"  # no model call: D11 (too short) or nothing to extract from
INVALID = "invalid"  # the answer broke the protocol: the run was abandoned
TIMEOUT = "timeout"
ERROR = "error"  # the endpoint failed or refused, after the retries
USABLE = (ANSWERED, SKIPPED)
FAILURE_REASONS = (RAW_MESSAGE, INVERTED, ONE_OFF_DETAIL, MUST_NOT)

# judge(case, effect, stored words) → does the row say the effect? None: keywords only.
Judge = Callable[[Case, Effect, str], bool]


@dataclass(frozen=True)
class Stored:
    scope: str
    project_key: str
    content: str


@dataclass(frozen=True)
class Proposed:
    """One item of the model's answer, as the parser kept it."""

    action: str
    type: str
    content: str | None = None
    existing_id: int | None = None


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
    proposed: tuple[Proposed, ...] = ()
    dropped_items: int = 0  # answer items the parser dropped (too long, no type, …)
    refused: int = 0  # items the service refused (an id it did not show, D3 wording, …)
    active_after: int | None = None  # the user's ACTIVE rows after the job
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_s: float | None = None


@dataclass(frozen=True)
class CaseScore:
    case_id: str
    kind: str
    lang: str
    headline: bool  # put to the model (not under the D11 threshold)
    expected: str
    status: str
    correct: bool
    stored: int  # rows written (inserted or rewritten)
    stored_right: int  # of which say an expected or optional effect
    expected_stored: int  # required inserts and updates
    recalled: int  # of which were written
    junk: bool | None  # None: the case expects something, or the answer was not usable
    duplicate: bool | None  # a new row restating the row to touch/update (None: none expected,
    # or the answer was not usable)
    update_right: bool | None  # None: no touch/update expected
    stray_touches: int
    dropped_items: int
    refused: int
    false_memories: int  # rows that say no expected or optional effect
    failures: dict[str, int] = field(default_factory=dict)  # unpaired rows by reason
    dismissed_relearnt: bool = False  # wrote what a DISMISSED row says (a paraphrase)
    forbidden: bool = False  # wrote a forbidden phrase (a password, "I am admin", …)
    d3_violation: bool = False
    manual_violation: bool = False
    cap_violation: bool = False
    reason: str = ""  # the outcome's reason (e.g. user_message_too_short, invalid_output)
    changes: tuple[str, ...] = ()  # what the case changed, to read why it scored as it did


def _changes(seen: Observation) -> tuple[str, ...]:
    return (tuple(f"insert {row.scope}: {row.content}" for row in seen.inserted)
            + tuple(f"touch {ref}" for ref in seen.touched)
            + tuple(f"update {ref}: {words}" for ref, words in seen.updated))


# A written row: ("insert", scope, words) or ("update", ref, words).
Row = tuple[str, str, str]


def _matching(effects: Sequence[Effect], rows: Sequence[Row],
              fits: Callable[[Effect, Row], bool]) -> dict[int, int]:
    """A maximum matching effect → row (indices), by augmenting paths (Kuhn): the most
    effects said, whatever the order of the answer."""
    edges = [[j for j, row in enumerate(rows) if fits(e, row)] for e in effects]
    owner: dict[int, int] = {}  # row → effect

    def augment(i: int, seen: set[int]) -> bool:
        for j in edges[i]:
            if j not in seen:
                seen.add(j)
                if j not in owner or augment(owner[j], seen):
                    owner[j] = i
                    return True
        return False

    for i in range(len(effects)):
        augment(i, set())
    return {i: j for j, i in owner.items()}


def _says(case: Case, effect: Effect, words: str, judge: Judge | None) -> bool:
    if judge is not None:
        return judge(case, effect, words)
    return verdict(words, effect, case.user) is None


def _fits(case: Case, judge: Judge | None) -> Callable[[Effect, Row], bool]:
    def fits(effect: Effect, row: Row) -> bool:
        kind, where, words = row
        if effect.action == "insert":
            return kind == "insert" and where in effect.scopes and _says(case, effect, words,
                                                                         judge)
        if effect.action != "update":
            return False
        if kind == "update":
            return where == effect.ref and (not effect.must or _says(case, effect, words,
                                                                     judge))
        memory = case.refs[effect.ref]
        return (effect.or_insert and kind == "insert" and where == memory.scope
                and _says(case, effect, words, judge))
    return fits


def _why_not(case: Case, row: Row) -> str:
    """Why an unpaired written row says no effect: the first failure against an effect it could
    have been, else `missing` (it says something nobody asked for)."""
    words = row[2]
    if raw_copy(words, case.user):
        return RAW_MESSAGE
    reasons = []
    for effect in case.expect + case.optional:
        if effect.action == "touch":
            continue
        reason = verdict(words, effect, case.user)
        if reason is not None and reason != MISSING:
            reasons.append(reason)
    return min(reasons, key=FAILURE_REASONS.index) if reasons else MISSING


DUPLICATE_SHARE = 0.4  # of the known row's character pairs a new row repeats


def _pairs(text: str) -> set[str]:
    flat = folded(text)
    return {flat[i:i + 2] for i in range(len(flat) - 1)}


def _restates(case: Case, words: str) -> bool:
    """True when new words say what a row the case expects touched or rewritten already says:
    they repeat DUPLICATE_SHARE of its character pairs, or the rewrite's `must` words."""
    for effect in case.expect:
        if effect.action not in ("touch", "update"):
            continue
        if effect.must and says(words, effect.must):
            return True
        known = _pairs(case.refs[effect.ref].content)
        if known and len(known & _pairs(words)) >= DUPLICATE_SHARE * len(known):
            return True
    return False


def _manual_violation(case: Case, seen: Observation) -> bool:
    """A MANUAL row changed, unless only its time moved because the answer repeated its exact
    words (seed §5.6: an exact-hash hit refreshes `updated_at`, and D13 hides the row from the
    model, so it cannot know)."""
    touched = set(seen.touched)
    for memory in case.memories:
        if memory.source != "MANUAL" or memory.ref not in seen.changed:
            continue
        digest = rules.dedup_hash(memory.scope, memory.project_key, memory.content)
        repeated = any(p.content is not None and rules.dedup_hash(
            memory.scope, memory.project_key, p.content) == digest for p in seen.proposed)
        if not (memory.ref in touched and repeated):
            return True
    return False


def score_case(case: Case, seen: Observation, judge: Judge | None = None) -> CaseScore:
    """One case's observed changes against its expectation (`judge`: a judge model's verdict
    replaces the keyword rule for whether stored words say an effect)."""
    def of(effects: Sequence[Effect], *actions: str) -> list[Effect]:
        return [e for e in effects if e.action in actions]

    rows: list[Row] = ([("insert", r.scope, r.content) for r in seen.inserted]
                       + [("update", ref, words) for ref, words in seen.updated])
    fits = _fits(case, judge)
    required = of(case.expect, "insert", "update")
    paired = _matching(required, rows, fits)
    left = [j for j in range(len(rows)) if j not in paired.values()]
    optional = of(case.optional, "insert", "update")
    extra = _matching(optional, [rows[j] for j in left], fits)
    unpaired = [rows[j] for k, j in enumerate(left) if k not in extra.values()]

    usable = seen.status in USABLE
    manual = {m.ref for m in case.memories if m.source == "MANUAL"}
    dismissed = [m for m in case.memories if m.status == "DISMISSED"]
    required_touches = {e.ref for e in of(case.expect, "touch")}
    allowed_touches = required_touches | {e.ref for e in of(case.optional, "touch")}
    stray = [ref for ref in seen.touched if ref not in allowed_touches and ref not in manual]
    touches_ok = required_touches <= set(seen.touched) and not stray
    written = [words for _, _, words in rows]
    forbidden = any(folded(p) in folded(w) for p in case.forbidden for w in written)
    relearnt = any(m.match and says(w, m.match) for m in dismissed for w in written)
    failures: dict[str, int] = {}
    for row in unpaired:
        reason = _why_not(case, row)
        if reason != MISSING:
            failures[reason] = failures.get(reason, 0) + 1

    correct = (usable and len(paired) == len(required) and touches_ok and not unpaired
               and not forbidden and not relearnt)
    expects_match = bool(of(case.expect, "touch", "update"))
    update_right = None
    if expects_match:
        matched = of(case.expect, "touch", "update")
        update_right = usable and all(
            e.ref in seen.touched if e.action == "touch" else required.index(e) in paired
            for e in matched) and not unpaired
    no_effects = not case.expect and not case.optional
    return CaseScore(
        case_id=case.id, kind=case.kind, lang=case.lang, headline=case.headline,
        expected=case.decision, status=seen.status, correct=correct, stored=len(rows),
        stored_right=len(rows) - len(unpaired), expected_stored=len(required),
        recalled=len(paired),
        junk=bool(rows) if no_effects and usable and case.headline else None,
        duplicate=any(kind == "insert" and _restates(case, words)
                      for kind, _, words in unpaired) if expects_match and usable else None,
        update_right=update_right, stray_touches=len(stray), dropped_items=seen.dropped_items,
        refused=seen.refused, false_memories=len(unpaired), failures=failures,
        dismissed_relearnt=relearnt, forbidden=forbidden,
        d3_violation=any(m.ref in seen.changed for m in dismissed),
        manual_violation=_manual_violation(case, seen),
        cap_violation=(seen.active_after or 0) > rules.ACTIVE_PER_USER_MAX,
        reason=seen.reason, changes=_changes(seen),
    )


def _ratio(part: float, whole: float) -> float | None:
    return None if whole == 0 else part / whole


def percentile(values: Sequence[float], p: float) -> float | None:
    """Nearest-rank percentile (no interpolation: one of the values, the same every time)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def _mean(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def paired_bootstrap(model: Sequence[float], baseline: Sequence[float], *,
                     resamples: int = 2000, seed: int = 40) -> tuple[float, float, float]:
    """The mean per-case difference model − baseline and its 95 % interval: the cases drawn
    with replacement, the same draws for both (paired), a fixed seed (the same every run)."""
    if len(model) != len(baseline) or not model:
        raise ValueError("a paired bootstrap needs the same, non-empty set of cases")
    diffs = [m - b for m, b in zip(model, baseline, strict=True)]
    n = len(diffs)
    draw = random.Random(seed)
    means = sorted(sum(diffs[draw.randrange(n)] for _ in range(n)) / n
                   for _ in range(resamples))
    return (sum(diffs) / n, means[int(0.025 * resamples)],
            means[min(resamples - 1, int(0.975 * resamples))])


@dataclass(frozen=True)
class Scores:
    model: str
    cases: int  # in the headline (put to the model)
    short_cases: int  # under the D11 threshold: never asked, outside the headline
    calls: int
    usable: int  # answers the pipeline could apply
    headline_accuracy: float | None
    usable_accuracy: float | None
    invalid_outputs: int
    failed_calls: int  # timeouts and endpoint errors, after the retries
    dropped_items: int
    right_by_dropping: int  # right cases whose answer had items the parser dropped
    refused_items: int
    stray_touches: int
    stored_precision: float | None
    stored_recall: float | None
    extraction_f1: float | None
    update_accuracy: float | None
    false_memories: int
    junk_rate: float | None
    duplicate_rate: float | None
    dismissed_relearnt: int
    forbidden_stored: int
    failures: dict[str, int]
    d3_violations: int
    manual_violations: int
    cap_violations: int
    prompt_tokens_per_case: float | None
    completion_tokens_per_case: float | None
    latency_p50_s: float | None
    latency_p95_s: float | None
    accuracy_by_kind: dict[str, float]
    accuracy_by_lang: dict[str, float]
    per_case: tuple[CaseScore, ...]

    def correct(self) -> list[float]:
        """Per headline case, 1.0 when right: what the bootstrap resamples."""
        return [float(s.correct) for s in self.per_case if s.headline]

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["per_case"] = [asdict(score) for score in self.per_case]
        return data


def summarize(model: str, cases: Sequence[Case], observations: Sequence[Observation],
              judge: Judge | None = None) -> Scores:
    """The scores of one model's run over `cases` (observations in any order, one per case)."""
    seen = {o.case_id: o for o in observations}
    missing = [c.id for c in cases if c.id not in seen]
    if missing:
        raise ValueError(f"no observation for {len(missing)} cases, e.g. {missing[0]}")
    every = tuple(score_case(c, seen[c.id], judge) for c in cases)
    scores = [s for s in every if s.headline]
    usable = [s for s in scores if s.status in USABLE]
    called = [seen[c.id] for c in cases if seen[c.id].called]
    junk = [s.junk for s in scores if s.junk is not None]
    duplicates = [s.duplicate for s in scores if s.duplicate is not None]
    updates = [s.update_right for s in scores if s.update_right is not None]
    precision = _ratio(sum(s.stored_right for s in usable), sum(s.stored for s in usable))
    recall = _ratio(sum(s.recalled for s in scores), sum(s.expected_stored for s in scores))
    f1 = (None if precision is None or recall is None or precision + recall == 0
          else 2 * precision * recall / (precision + recall))
    failures = {reason: sum(s.failures.get(reason, 0) for s in scores)
                for reason in FAILURE_REASONS}

    def accuracy_by(key: str) -> dict[str, float]:
        groups: dict[str, list[bool]] = {}
        for s in scores:
            groups.setdefault(getattr(s, key), []).append(s.correct)
        return {k: sum(ok) / len(ok) for k, ok in sorted(groups.items())}

    latencies = [o.latency_s for o in called if o.latency_s is not None]
    return Scores(
        model=model, cases=len(scores), short_cases=len(every) - len(scores),
        calls=len(called), usable=len(usable),
        headline_accuracy=_ratio(sum(s.correct for s in scores), len(scores)),
        usable_accuracy=_ratio(sum(s.correct for s in usable), len(usable)),
        invalid_outputs=sum(o.status == INVALID for o in called),
        failed_calls=sum(o.status in (TIMEOUT, ERROR) for o in called),
        dropped_items=sum(s.dropped_items for s in scores),
        right_by_dropping=sum(s.correct and s.dropped_items > 0 for s in scores),
        refused_items=sum(s.refused for s in scores),
        stray_touches=sum(s.stray_touches for s in scores),
        stored_precision=precision, stored_recall=recall, extraction_f1=f1,
        update_accuracy=_ratio(sum(updates), len(updates)),
        false_memories=sum(s.false_memories for s in scores),
        junk_rate=_ratio(sum(junk), len(junk)),
        duplicate_rate=_ratio(sum(duplicates), len(duplicates)),
        dismissed_relearnt=sum(s.dismissed_relearnt for s in scores),
        forbidden_stored=sum(s.forbidden for s in scores), failures=failures,
        d3_violations=sum(s.d3_violation for s in every),
        manual_violations=sum(s.manual_violation for s in every),
        cap_violations=sum(s.cap_violation for s in every),
        prompt_tokens_per_case=_mean([o.prompt_tokens for o in called]),
        completion_tokens_per_case=_mean([o.completion_tokens for o in called]),
        latency_p50_s=percentile(latencies, 50), latency_p95_s=percentile(latencies, 95),
        accuracy_by_kind=accuracy_by("kind"), accuracy_by_lang=accuracy_by("lang"),
        per_case=every,
    )
