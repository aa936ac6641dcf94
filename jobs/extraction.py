"""RQ entry point of the extraction job (enqueued by the completion webhook)."""

from __future__ import annotations

from typing import Any

from rq import Retry

from app.extraction.runner import run_extraction
from jobs.worker import run_current


def extract_memories(payload: dict[str, Any]) -> Retry | None:
    """Extract memories from one finished task: `payload` is ids and the two message texts."""
    return run_current(run_extraction, payload)
