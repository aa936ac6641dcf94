"""Fixtures of the pipeline tests: one extraction, end to end, through the real RQ worker."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import assert_ok
from tests.extraction.support import capture_on, event, outcomes


@pytest.fixture
def extract(app, llm, webhook, run_jobs):
    """`extract(reply, **event_fields)` → the outcome of one job.

    `reply` is the model's answer (a list is sent as a JSON array, a string as is) or None when
    the model must not be called. The user has auto-capture on.
    """
    capture_on(app)

    def run(reply: Any, **fields: Any) -> dict[str, Any]:
        if isinstance(reply, list):
            llm.reply_items(reply)
        elif reply is not None:
            llm.reply(reply)
        assert assert_ok(webhook(event(**fields)), 202)["enqueued"] is True
        run_jobs()
        assert llm.pending == 0, "a scripted reply was not asked for"
        return outcomes(app)[-1]

    return run
