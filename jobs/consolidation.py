"""RQ entry point of the consolidation job (enqueued at the end of an extraction, D15)."""

from __future__ import annotations

from typing import Any

from rq import Retry

from app.extraction.runner import run_consolidation
from jobs.worker import run_current


def consolidate_memories(payload: dict[str, Any]) -> Retry | None:
    """Consolidate one memory group of a user: `payload` is the user id and the group's key."""
    return run_current(run_consolidation, payload)
