"""Probes for load balancers and orchestrators: liveness (`/healthz`) and readiness (`/readyz`,
SPEC §9 "Readiness")."""

from __future__ import annotations

import logging

from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from flask import Blueprint, current_app

from app.envelope import DEPENDENCY_ERRORS
from app.extensions import db

log = logging.getLogger(__name__)

bp = Blueprint("health", __name__)

OK = "ok"
ABSENT = "absent"  # REDIS_URL unset: the embedded setup, jobs run in-process
UNREACHABLE = "unreachable"
# The database answers but its schema is not at the newest migration: this release's code would
# read columns or tables that are not there yet (run `flask --app wsgi db upgrade`).
NOT_MIGRATED = "not_migrated"


@bp.get("/healthz")
def healthz():
    """The process answers; touches no dependency, so it stays cheap under any load."""
    return {"status": "ok"}


@bp.get("/readyz")
def readyz():
    """200 `{"database": "ok", "redis": "ok"|"absent"}` when this process can serve: the database
    answers at the newest migration and Redis, when configured, answers. Else 503 with the same
    two keys, the failing one saying `unreachable` or `not_migrated`. No credential needed:
    it names the parts, never a host, a version or an error text."""
    parts = {"database": database_state(), "redis": redis_state()}
    ready = all(state in (OK, ABSENT) for state in parts.values())
    return parts, 200 if ready else 503, {"Cache-Control": "no-store"}


def newest_migrations() -> frozenset[str]:
    """The heads of the migration scripts this release ships (read once per app)."""
    heads = current_app.extensions.get("memory_migration_heads")
    if heads is None:
        directory = current_app.extensions["migrate"].directory
        heads = frozenset(ScriptDirectory(directory).get_heads())
        current_app.extensions["memory_migration_heads"] = heads
    return heads


def applied_migrations() -> frozenset[str]:
    """The migrations the database is at (none for an empty one); raises when it is down."""
    # begin(): the read ends in a commit, so no transaction goes back to the pool open.
    with db.engine.begin() as connection:
        return frozenset(MigrationContext.configure(connection).get_current_heads())


def database_state() -> str:
    try:
        applied = applied_migrations()
    except DEPENDENCY_ERRORS as exc:
        log.warning("event=readiness.database_unreachable error=%s", type(exc).__name__)
        return UNREACHABLE
    if applied != newest_migrations():
        log.warning("event=readiness.not_migrated applied=%s newest=%s", sorted(applied),
                    sorted(newest_migrations()))
        return NOT_MIGRATED
    return OK


def redis_state() -> str:
    if not current_app.config.get("REDIS_URL"):
        return ABSENT
    try:
        current_app.extensions["memory_queue"].redis.ping()
    except DEPENDENCY_ERRORS as exc:
        log.warning("event=readiness.redis_unreachable error=%s", type(exc).__name__)
        return UNREACHABLE
    return OK
