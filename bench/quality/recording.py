"""`--record FILE` / `--replay FILE`: a run's raw model answers, with their tokens and latency,
and the judge model's verdicts, kept so the run can be scored again later without any model
(after a prompt, rule or label change, say, to compare) — for free and the same every time."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.quality.runner import Answer

VERSION = 2
READABLE = (1, 2)  # version 1: answers only, no judge verdicts


@dataclass
class Recording:
    # (name shown in the table, the provider's model name, answers by case id)
    runs: list[tuple[str, str, dict[str, Answer]]] = field(default_factory=list)
    verdicts: dict[str, bool] = field(default_factory=dict)  # judge.key → verdict


def write(path: Path, recording: Recording) -> None:
    data: dict[str, Any] = {"version": VERSION, "models": [
        {"name": name, "model": model,
         "answers": {case_id: asdict(answer) for case_id, answer in sorted(answers.items())}}
        for name, model, answers in recording.runs],
        "judge_verdicts": dict(sorted(recording.verdicts.items()))}
    path.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


def read(path: Path) -> Recording:
    data = json.loads(path.read_text(encoding="utf-8"))
    if data.get("version") not in READABLE:
        raise ValueError(f"{path}: not a recording of a version this reads ({READABLE})")
    return Recording(
        [(entry["name"], entry["model"],
          {case_id: Answer(**answer) for case_id, answer in entry["answers"].items()})
         for entry in data["models"]],
        {k: bool(v) for k, v in (data.get("judge_verdicts") or {}).items()})
