"""Fixtures of the pipeline tests: one extraction, or one consolidation, end to end, through the
real RQ worker; and the embedded setup (SQLite migrated by the CLI, no Redis)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from app.auth.service import ensure_user
from app.db_types import utcnow
from app.extensions import db
from app.memory import service as memory_service
from app.system import service as system
from tests.completions import (
    USER_ID,
    capture_on,
    enqueue_consolidation,
    event,
    last_consolidation,
    outcomes,
    script,
)
from tests.conftest import WEBHOOK_SECRET, assert_ok, build_app, dispose_pools
from tests.llm_server import ScriptedLlm
from tests.workers import ROOT, worker_env


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


@pytest.fixture(scope="session")
def migrated_sqlite(tmp_path_factory) -> Path:
    """An empty SQLite file migrated by `flask --app wsgi db upgrade`, once per run."""
    path = tmp_path_factory.mktemp("embedded") / "migrated.sqlite3"
    env = worker_env(DATABASE_URL=f"sqlite:///{path}")
    env.pop("REDIS_URL")
    result = subprocess.run([sys.executable, "-m", "flask", "--app", "wsgi", "db", "upgrade"],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return path


@pytest.fixture
def embedded(migrated_sqlite, tmp_path, monkeypatch):
    """A copy of the migrated SQLite file, an app without REDIS_URL, a user with auto-capture
    on, and the scripted LLM as the default model."""
    path = tmp_path / "embedded.sqlite3"
    shutil.copyfile(migrated_sqlite, path)
    url = f"sqlite:///{path}"
    llm = ScriptedLlm()
    monkeypatch.setenv("OPENAI_API_KEY", "test-openai-key")
    app = build_app({"TESTING": True, "SQLALCHEMY_DATABASE_URI": url, "REDIS_URL": None,
                      "MEMORY_WEBHOOK_SECRET": WEBHOOK_SECRET, "MEMORY_LLM_TIMEOUT_S": 5.0,
                      "MEMORY_RETRY_DELAYS_S": (1,)})
    with app.app_context():
        system.add_model("scripted", "scripted-default", base_url=llm.base_url, default=True)
        ensure_user(USER_ID)
        memory_service.set_auto_capture(USER_ID, True)
        db.session.remove()
    yield app, llm
    llm.close()
    with app.app_context():
        db.session.remove()
        db.engine.dispose()
    dispose_pools(app)
