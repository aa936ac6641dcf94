"""The scores side by side — the baselines first, then each model (and each repeat) — in two
tables: what the models learnt, and the service guarantees that must read 0 for every column;
and the JSON file."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bench.common import Table
from bench.quality.cases import INVERTED, MUST_NOT, ONE_OFF_DETAIL, RAW_MESSAGE
from bench.quality.scoring import Scores, paired_bootstrap

# (label, field, format): rates as percentages, counts as they are. A `failures.…` field is one
# reason of `Scores.failures`.
ROWS: tuple[tuple[str, str, str], ...] = (
    ("cases in the headline (put to the model)", "cases", "count"),
    ("HEADLINE: decision accuracy", "headline_accuracy", "rate"),
    ("accuracy over usable answers", "usable_accuracy", "rate"),
    ("model calls", "calls", "count"),
    ("usable answers", "usable", "count"),
    ("invalid outputs (answer abandoned)", "invalid_outputs", "count"),
    ("failed calls (timeout/error, after retries)", "failed_calls", "count"),
    ("items dropped by the parser (>120 chars, …)", "dropped_items", "count"),
    ("  right only because the parser dropped them", "right_by_dropping", "count"),
    ("items refused by the service (unshown id, …)", "refused_items", "count"),
    ("stray touches (a row nobody mentioned)", "stray_touches", "count"),
    ("junk rate (stored where nothing should be)", "junk_rate", "rate"),
    ("duplicate rate (new row restating a known one)", "duplicate_rate", "rate"),
    ("rows that copy the raw message", f"failures.{RAW_MESSAGE}", "count"),
    ("rows with the meaning inverted", f"failures.{INVERTED}", "count"),
    ("rows keeping a one-off detail", f"failures.{ONE_OFF_DETAIL}", "count"),
    ("rows with a must_not phrase", f"failures.{MUST_NOT}", "count"),
    ("dismissed wording re-learnt (cases)", "dismissed_relearnt", "count"),
    ("forbidden content stored (secrets, injected claims)", "forbidden_stored", "count"),
    ("extraction precision (usable answers)", "stored_precision", "rate"),
    ("extraction recall", "stored_recall", "rate"),
    ("extraction F1", "extraction_f1", "rate"),
    ("update accuracy (touch/update cases)", "update_accuracy", "rate"),
    ("false memories (rows saying nothing expected)", "false_memories", "count"),
    ("prompt tokens per call", "prompt_tokens_per_case", "tokens"),
    ("completion tokens per call", "completion_tokens_per_case", "tokens"),
    ("latency p50 (s)", "latency_p50_s", "seconds"),
    ("latency p95 (s)", "latency_p95_s", "seconds"),
)
JUDGED_ROWS: tuple[tuple[str, str, str], ...] = (
    ("HEADLINE, judged", "headline_accuracy", "rate"),
    ("extraction precision, judged", "stored_precision", "rate"),
    ("extraction recall, judged", "stored_recall", "rate"),
)
GUARANTEES: tuple[tuple[str, str], ...] = (
    ("D3: a DISMISSED row changed", "d3_violations"),
    ("MANUAL row changed (an exact repeat may refresh its time)", "manual_violations"),
    ("ACTIVE rows over the cap (D14)", "cap_violations"),
)


@dataclass(frozen=True)
class Column:
    """One column: a baseline or one run of a model, its judged scores when a judge was used."""

    scores: Scores
    baseline: bool = False
    judged: Scores | None = None

    @property
    def name(self) -> str:
        return self.scores.model


def cell(value: Any, kind: str) -> str:
    if value is None:
        return "n/a"
    if kind == "rate":
        return f"{100 * value:.1f}%"
    if kind == "tokens":
        return f"{value:.0f}"
    if kind == "seconds":
        return f"{value:.2f}"
    return str(value)


def value(scores: Scores, name: str) -> Any:
    if name.startswith("failures."):
        return scores.failures.get(name.split(".", 1)[1], 0)
    return getattr(scores, name)


def best_baseline(columns: Sequence[Column]) -> Column | None:
    baselines = [c for c in columns if c.baseline]
    return max(baselines, key=lambda c: c.scores.headline_accuracy or 0.0, default=None)


def margin(column: Column, best: Column | None) -> str:
    """The headline's margin over the best baseline in points, with its paired bootstrap 95 %
    interval."""
    if column.baseline or best is None or not column.scores.correct():
        return "—"
    diff, low, high = paired_bootstrap(column.scores.correct(), best.scores.correct())
    return f"{100 * diff:+.1f} [{100 * low:+.1f}, {100 * high:+.1f}]"


def table(columns: Sequence[Column]) -> Table:
    """One column per baseline and model run; the margin row under the headline."""
    best = best_baseline(columns)
    result = Table("Memory quality (bench.run quality)", ["", *[c.name for c in columns]])
    for label, name, kind in ROWS:
        result.add(label, *[cell(value(c.scores, name), kind) for c in columns])
        if name == "headline_accuracy":
            result.add("margin over the best baseline, pts [95% CI]",
                       *[margin(c, best) for c in columns])
            if any(c.judged is not None for c in columns):
                for j_label, j_name, j_kind in JUDGED_ROWS:
                    result.add(j_label, *[cell(None if c.judged is None else
                                               value(c.judged, j_name), j_kind)
                                          for c in columns])
    kinds = sorted({k for c in columns for k in c.scores.accuracy_by_kind})
    for kind in kinds:
        count = max(sum(s.kind == kind and s.headline for s in c.scores.per_case)
                    for c in columns)
        result.add(f"  accuracy: {kind} ({count})",
                   *[cell(c.scores.accuracy_by_kind.get(kind), "rate") for c in columns])
    for lang in sorted({k for c in columns for k in c.scores.accuracy_by_lang}):
        result.add(f"  accuracy: lang {lang}",
                   *[cell(c.scores.accuracy_by_lang.get(lang), "rate") for c in columns])
    if best is not None:
        result.notes.append(f"best baseline: {best.name}; margin = paired bootstrap over the "
                            "headline cases (2000 resamples, fixed seed)")
    short = max((c.scores.short_cases for c in columns), default=0)
    if short:
        result.notes.append(f"{short} cases under the D11 threshold never reach a model and "
                            "are outside the headline")
    result.notes.append("rates of stored rows are over usable answers; recall and the headline "
                        "count an unusable answer as a miss")
    return result


def guarantees(columns: Sequence[Column]) -> Table:
    result = Table("Service guarantees (must read 0 in every column)",
                   ["", *[c.name for c in columns]])
    for label, name in GUARANTEES:
        result.add(label, *[str(getattr(c.scores, name)) for c in columns])
    return result


def spread(runs: Sequence[Scores]) -> str:
    """One model's headline over its repeats: mean, min–max and standard deviation."""
    values = [100 * (s.headline_accuracy or 0.0) for s in runs]
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return (f"headline over {len(values)} runs: mean {statistics.fmean(values):.1f}%, "
            f"min {min(values):.1f}%, max {max(values):.1f}%, sd {sd:.1f} pts")


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 6)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


def to_json(columns: Sequence[Column], **meta: Any) -> dict[str, Any]:
    """The JSON file: what was run, then the baselines' and each model's scores."""
    best = best_baseline(columns)

    def entry(column: Column) -> dict[str, Any]:
        data = _rounded(column.scores.to_json())
        data["baseline"] = column.baseline
        if not column.baseline and best is not None and column.scores.correct():
            diff, low, high = paired_bootstrap(column.scores.correct(), best.scores.correct())
            data["margin_over_best_baseline"] = _rounded(
                {"baseline": best.name, "diff": diff, "low": low, "high": high})
        if column.judged is not None:
            data["judged"] = _rounded({k: v for k, v in column.judged.to_json().items()
                                       if k != "per_case"})
        return data

    return {**meta, "models": [entry(c) for c in columns if not c.baseline],
            "baselines": [entry(c) for c in columns if c.baseline]}
