"""The migrations are the schema: they run on SQLite and MariaDB and match the models."""

import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from app.extensions import db

ROOT = Path(__file__).resolve().parent.parent


def test_db_upgrade_builds_the_embedded_sqlite_schema(tmp_path):
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path}/fresh.sqlite3"}
    env.pop("REDIS_URL", None)
    result = subprocess.run([sys.executable, "-m", "flask", "--app", "wsgi", "db", "upgrade"],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    with sqlite3.connect(tmp_path / "fresh.sqlite3") as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert {"memory_item", "user_memory_preference", "permission", "system_setting",
                "llm_model", "user", "session", "api_token"} <= tables
        assert conn.execute("SELECT code FROM permission").fetchall() == [("memory:read",)]
        settings = dict(conn.execute("SELECT setting_key, value FROM system_setting"))
        assert settings.pop("memory.extractionModelId") == ""
        # Made once per installation: its Redis namespace (SPEC §11).
        assert re.fullmatch(r"[0-9a-f]{12}", settings.pop("installation.id"))
        assert settings == {}


def test_models_match_the_migrated_mariadb_schema(app):
    with app.app_context(), db.engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        assert compare_metadata(context, db.metadata) == []
