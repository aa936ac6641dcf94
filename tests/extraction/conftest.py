"""Fixtures of the pipeline tests: one extraction, or one consolidation, end to end, through the
real RQ worker."""

from __future__ import annotations

from typing import Any

import pytest

from app.db_types import utcnow
from tests.conftest import assert_ok
from tests.extraction.support import (
    capture_on,
    enqueue_consolidation,
    event,
    last_consolidation,
    outcomes,
    script,
)


@pytest.fixture
def extract(app, llm, webhook, run_jobs):
    """`extract(reply, **event_fields)` → the outcome of one job.

    `reply` is the model's answer (a list is sent as a JSON array, a string as is) or None when
    the model must not be called. The user has auto-capture on, and was consolidated a moment
    ago: these tests are about one extraction, so the D15 cooldown keeps a consolidation from
    following it (tests/extraction/test_consolidation*.py drive that).
    """
    capture_on(app)
    last_consolidation(app, utcnow())

    def run(reply: Any, **fields: Any) -> dict[str, Any]:
        script(llm, reply)
        assert assert_ok(webhook(event(**fields)), 202)["enqueued"] is True
        run_jobs()
        assert llm.pending == 0, "a scripted reply was not asked for"
        return outcomes(app)[-1]

    return run


@pytest.fixture
def consolidate(app, llm, run_jobs):
    """`consolidate(reply, project_key=None)` → the outcome of one consolidation job of one
    group of USER_ID (None: the USER group), enqueued as the trigger does.

    `reply` is the model's answer as for `extract`. The user has auto-capture on.
    """
    capture_on(app)

    def run(reply: Any, project_key: str | None = None) -> dict[str, Any]:
        script(llm, reply)
        job_id = enqueue_consolidation(app, project_key)
        run_jobs()
        assert llm.pending == 0, "a scripted reply was not asked for"
        (outcome,) = [o for o in outcomes(app) if o["jobId"] == job_id]
        return outcome

    return run
