"""Fixtures of the job tests: the embedded setup (SQLite migrated by the CLI, no Redis)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from app import create_app
from app.auth.service import ensure_user
from app.extensions import db
from app.memory import service as memory_service
from app.system import service as system
from tests.conftest import WEBHOOK_SECRET, dispose_pools
from tests.extraction.support import USER_ID
from tests.jobs.workers import ROOT, worker_env
from tests.llm_server import ScriptedLlm


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
    app = create_app({"TESTING": True, "SQLALCHEMY_DATABASE_URI": url, "REDIS_URL": None,
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
