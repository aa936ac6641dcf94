"""The scores of one or more models: a table side by side, and the JSON file."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bench.common import Table
from bench.quality.scoring import Scores

# (label, field, format): rates as percentages, counts as they are.
ROWS: tuple[tuple[str, str, str], ...] = (
    ("cases", "cases", "count"),
    ("model calls", "calls", "count"),
    ("decision accuracy", "decision_accuracy", "rate"),
    ("stored precision", "stored_precision", "rate"),
    ("stored recall", "stored_recall", "rate"),
    ("junk rate (stored where nothing should be)", "junk_rate", "rate"),
    ("duplicate rate (insert where touch/update)", "duplicate_rate", "rate"),
    ("DISMISSED violations (must be 0)", "dismissed_violations", "count"),
    ("MANUAL violations (must be 0)", "manual_violations", "count"),
    ("invalid-output rate", "invalid_output_rate", "rate"),
    ("timeout/error rate", "failure_rate", "rate"),
    ("prompt tokens per case", "prompt_tokens_per_case", "tokens"),
    ("completion tokens per case", "completion_tokens_per_case", "tokens"),
    ("latency p50 (s)", "latency_p50_s", "seconds"),
    ("latency p95 (s)", "latency_p95_s", "seconds"),
)


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


def table(runs: Sequence[Scores]) -> Table:
    """One column per model; then decision accuracy per kind of case."""
    result = Table("Memory quality (bench.run quality)", ["", *[s.model for s in runs]])
    for label, name, kind in ROWS:
        result.add(label, *[cell(getattr(s, name), kind) for s in runs])
    kinds = sorted({k for s in runs for k in s.accuracy_by_kind})
    for kind in kinds:
        counts = {s.model: sum(c.kind == kind for c in s.per_case) for s in runs}
        result.add(f"  accuracy: {kind} ({max(counts.values())} cases)",
                   *[cell(s.accuracy_by_kind.get(kind), "rate") for s in runs])
    result.notes.append("tokens per case and latency: over the cases that called the model")
    return result


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 6)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


def to_json(runs: Sequence[Scores], **meta: Any) -> dict[str, Any]:
    """The JSON file: what was run, then each model's scores and per-case results."""
    return {**meta, "models": [_rounded(s.to_json()) for s in runs]}
