"""`--record FILE` / `--replay FILE`: a run's raw model answers, with their tokens and latency,
kept so the run can be scored again later without the model (after a prompt, rule or label
change, say, to compare)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.quality.runner import Answer

VERSION = 1


def write(path: Path, runs: list[tuple[str, str, dict[str, Answer]]]) -> None:
    """`runs`: (name shown in the table, the provider's model name, answers by case id)."""
    data: dict[str, Any] = {"version": VERSION, "models": [
        {"name": name, "model": model,
         "answers": {case_id: asdict(answer) for case_id, answer in sorted(answers.items())}}
        for name, model, answers in runs]}
    path.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


def read(path: Path) -> list[tuple[str, str, dict[str, Answer]]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    if data.get("version") != VERSION:
        raise ValueError(f"{path}: not a recording of this version ({VERSION})")
    return [(entry["name"], entry["model"],
             {case_id: Answer(**answer) for case_id, answer in entry["answers"].items()})
            for entry in data["models"]]
