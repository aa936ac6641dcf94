"""The Flask app factory: configuration, extensions, engines, blueprints, jobs' hooks."""

from __future__ import annotations

from typing import Any

from flask import Flask
from flask_migrate import Migrate
from werkzeug.middleware.proxy_fix import ProxyFix

from app import config as app_config
from app import galera
from app.database import engines, pools, request_end
from app.extensions import db
from app.jsonbody import RequestJSONProvider
from app.wire import AsciiIntegerConverter


def create_app(config: dict[str, Any] | None = None) -> Flask:
    """Build the app from the environment; `config` overrides it (tests use this).

    The background jobs are wired in by `jobs.init_app(app)` (see `wsgi.py`): nothing in `app/`
    imports `jobs/`.
    """
    app = Flask(__name__, template_folder="../templates", static_folder="../static",
                instance_relative_config=True)
    # Before any route is added: `<int:…>` takes ASCII digits only (SPEC §9).
    app.url_map.converters["int"] = AsciiIntegerConverter
    app.config.from_mapping(app_config.from_environment(app.instance_path))
    if config:
        app.config.from_mapping(config)
    app_config.log_missing_platform_secrets(app.config)
    app.json = RequestJSONProvider(app)
    _tune_engine(app)
    _trust_proxies(app)

    db.init_app(app)
    request_end.init_app(app)
    # Flask-Migrate (and Alembic under it) only here: the domain's modules import no migration tool.
    Migrate(app, db, directory=app_config.MIGRATIONS_DIR)
    with app.app_context():
        pools.guard(db.engine)
    engines.init_app(app, app.config["SQLALCHEMY_ENGINE_OPTIONS"])
    galera.init_app(app)
    _import_models()

    from app import memory
    from app.auth import sessions, throttle
    from app.extraction import queue as job_queue
    from app.system import installation

    installation.init_app(app)  # first: the Redis users below key by its namespace
    sessions.init_app(app)
    throttle.init_app(app)

    job_queue.init_app(app)
    memory.init_app(app)

    from app.envelope import register_error_handlers

    register_error_handlers(app)
    _register_blueprints(app)

    from app import security_headers, site

    site.init_app(app)
    security_headers.init_app(app)

    from app.cli import register_cli

    register_cli(app)

    from app import logs, tracing
    from app.platform.api import ContextRead
    from app.platform.hot_path import HotPaths
    from app.platform.webhook import WebhookReceiver

    # Traces when the OTEL_* variables ask for them: Flask's own callable, before the hot paths
    # are put in front of it (they trace themselves).
    tracing.init_app(app)
    # Around everything but the request id: the platform's two hot paths answered by the
    # endpoints that own them, every other request by Flask.
    HotPaths.install(app, WebhookReceiver, ContextRead)
    # Outermost: every request's lines, on every path, carry its id, echoed in the response.
    # Flask's documented way to put middleware in front of the app (typed as a method).
    app.wsgi_app = logs.RequestIds(app.wsgi_app)  # type: ignore[method-assign]
    return app


def _trust_proxies(app: Flask) -> None:
    """Behind MEMORY_TRUSTED_PROXIES proxies, the client's address, scheme and host are the
    ones the N-th proxy back put in X-Forwarded-For/-Proto/-Host (werkzeug's ProxyFix): the login
    throttle counts the real client, and behind TLS Flask sees https (Secure cookies, the strict
    Referer check, HSTS). With 0, those headers are ignored: any client can write them."""
    proxies = app.config.get("MEMORY_TRUSTED_PROXIES") or 0
    if proxies:
        fixed = ProxyFix(app.wsgi_app, x_for=proxies, x_proto=proxies, x_host=proxies)
        app.wsgi_app = fixed  # type: ignore[method-assign]  # middleware, as above


def _tune_engine(app: Flask) -> None:
    url = app.config["SQLALCHEMY_DATABASE_URI"]
    options = dict(app.config.get("SQLALCHEMY_ENGINE_OPTIONS") or {})
    if url.startswith(("mysql", "mariadb")):
        # Each statement sees what others committed, so a count taken after the per-user row
        # lock is exact (the 200 cap under concurrency).
        options.setdefault("isolation_level", "READ COMMITTED")
        from pymysql.constants import CLIENT

        # Multi-statement queries for `app.database.batches` (a job's journal and outcome in one
        # round trip); FOUND_ROWS is what SQLAlchemy sets by default.
        options["connect_args"] = {"client_flag": CLIENT.MULTI_STATEMENTS | CLIENT.FOUND_ROWS,
                                   **(options.get("connect_args") or {})}
    # The pool would send one more ROLLBACK after each commit: a round trip per unit of work
    # (counted by the worker bench). `pools.prove_idle` sends it only where the connection
    # cannot prove that nothing is open.
    options.setdefault("pool_reset_on_return", None)
    app.config["SQLALCHEMY_ENGINE_OPTIONS"] = options


def _import_models() -> None:
    """Every model registered on db.metadata, for Alembic and relationships."""
    from app.auth import models as _auth  # noqa: F401
    from app.extraction import models as _extraction  # noqa: F401
    from app.memory import models as _memory  # noqa: F401
    from app.sessions import models as _sessions  # noqa: F401
    from app.system import models as _system  # noqa: F401


def _register_blueprints(app: Flask) -> None:
    from app.admin.api import bp as admin_api
    from app.admin.outcome_pages import bp as outcome_pages
    from app.admin.pages import bp as admin_pages
    from app.apispec import bp as openapi
    from app.auth.pages import bp as auth_pages
    from app.health import bp as health
    from app.metrics.exposition import bp as metrics
    from app.platform.api import bp as platform_api
    from app.platform.webhook import bp as webhook
    from app.user.api import bp as user_api
    from app.user.pages import bp as user_pages

    for blueprint in (health, auth_pages, user_pages, admin_pages, outcome_pages, user_api,
                      admin_api, platform_api, openapi):
        app.register_blueprint(blueprint)
    # The completion webhook (HMAC, not a token) and the Prometheus scrape endpoint.
    for blueprint in (webhook, metrics):
        app.register_blueprint(blueprint)
