"""Liveness and readiness (SPEC §9 "Readiness"): `/readyz` says whether this process can serve,
naming the failing part and nothing else."""

from __future__ import annotations

from flask_migrate import upgrade

from app.extensions import db

CLOSED_PORT_DATABASE = "mysql+pymysql://memory:s3cret-password@127.0.0.1:1/none"


def readyz(app) -> tuple[int, dict]:
    response = app.test_client().get("/readyz")
    return response.status_code, response.get_json()


def test_ready_when_the_database_is_migrated_and_redis_answers(app):
    assert readyz(app) == (200, {"database": "ok", "redis": "ok"})


def test_ready_without_redis_url_says_redis_absent(make_app):
    assert readyz(make_app(REDIS_URL=None)) == (200, {"database": "ok", "redis": "absent"})


def test_database_down_is_503_naming_the_database_without_its_url(make_app):
    app = make_app(SQLALCHEMY_DATABASE_URI=CLOSED_PORT_DATABASE)
    response = app.test_client().get("/readyz")
    assert response.status_code == 503
    assert response.get_json() == {"database": "unreachable", "redis": "ok"}
    assert b"s3cret" not in response.data and b"127.0.0.1" not in response.data


def test_redis_down_is_503_naming_redis(make_app):
    app = make_app(REDIS_URL="redis://127.0.0.1:1/0")
    assert readyz(app) == (503, {"database": "ok", "redis": "unreachable"})


def test_schema_behind_the_newest_migration_is_503_not_migrated(make_app, tmp_path):
    app = make_app(SQLALCHEMY_DATABASE_URI=f"sqlite:///{tmp_path}/old.sqlite3", REDIS_URL=None)
    assert readyz(app) == (503, {"database": "not_migrated", "redis": "absent"})
    with app.app_context():
        upgrade(revision="0004_provenance")
        db.session.remove()
    assert readyz(app) == (503, {"database": "not_migrated", "redis": "absent"})
    with app.app_context():
        upgrade()
        db.session.remove()
    assert readyz(app) == (200, {"database": "ok", "redis": "absent"})


def test_readiness_needs_no_credentials_and_is_never_cached(app):
    response = app.test_client().get("/readyz")
    assert response.status_code == 200
    assert response.headers["Cache-Control"] == "no-store"


def test_liveness_stays_ok_while_readiness_fails(make_app):
    app = make_app(SQLALCHEMY_DATABASE_URI=CLOSED_PORT_DATABASE, REDIS_URL="redis://127.0.0.1:1/0")
    client = app.test_client()
    assert client.get("/healthz").status_code == 200
    assert readyz(app) == (503, {"database": "unreachable", "redis": "unreachable"})
