"""App factory and configuration from the environment (SPEC §2)."""

import logging

import pytest

from app import create_app
from app.config import DEV_SECRET_KEY
from app.misconfigured import ConfigurationError
from app.platform import credentials
from tests.completions import event, post_webhook
from tests.conftest import TEST_DATABASE_URL


def test_config_override(make_app):
    assert make_app(MEMORY_LLM_TIMEOUT_S=7.0).config["MEMORY_LLM_TIMEOUT_S"] == 7.0


def test_defaults_are_the_embedded_setup(monkeypatch, tmp_path):
    for name in ("DATABASE_URL", "REDIS_URL", "SECRET_KEY", "MEMORY_WEBHOOK_SECRET",
                 "MEMORY_SERVICE_TOKEN", "MEMORY_LLM_TIMEOUT_S", "MEMORY_BOT_PROJECT_KEYS",
                 "FLASK_ENV", "APP_ENV"):
        monkeypatch.delenv(name, raising=False)
    app = create_app({"SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path}/x.db"})
    config = app.config
    assert config["REDIS_URL"] is None
    assert config["SECRET_KEY"] == DEV_SECRET_KEY
    assert config["MEMORY_WEBHOOK_SECRET"] is None and config["MEMORY_SERVICE_TOKEN"] is None
    assert config["MEMORY_LLM_TIMEOUT_S"] == 30
    assert config["MEMORY_BOT_PROJECT_KEYS"] == ("weixin-bot",)


def test_environment_is_read(monkeypatch, tmp_path):
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path}/y.db")
    monkeypatch.setenv("MEMORY_BOT_PROJECT_KEYS", "weixin-bot, dingtalk-bot ,")
    monkeypatch.setenv("MEMORY_LLM_TIMEOUT_S", "12.5")
    monkeypatch.setenv("MEMORY_SESSION_HOURS", "8")
    app = create_app()
    assert app.config["SQLALCHEMY_DATABASE_URI"].endswith("/y.db")
    assert app.config["MEMORY_BOT_PROJECT_KEYS"] == ("weixin-bot", "dingtalk-bot")
    assert app.config["MEMORY_LLM_TIMEOUT_S"] == 12.5
    assert app.permanent_session_lifetime.total_seconds() == 8 * 3600


@pytest.mark.parametrize("variable", ["FLASK_ENV", "APP_ENV"])
def test_dev_secret_key_is_refused_in_production(monkeypatch, variable):
    monkeypatch.delenv("SECRET_KEY", raising=False)
    monkeypatch.setenv(variable, "production")
    with pytest.raises(ConfigurationError, match="SECRET_KEY"):
        create_app()


def test_production_logs_which_platform_secrets_are_missing(monkeypatch, caplog):
    for name in ("MEMORY_SERVICE_TOKEN", "MEMORY_WEBHOOK_SECRET", "FLASK_ENV"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("APP_ENV", "production")
    monkeypatch.setenv("SECRET_KEY", "a-real-production-key")
    monkeypatch.setenv("DATABASE_URL", TEST_DATABASE_URL)
    with caplog.at_level(logging.WARNING, logger="app.config"):
        create_app()
    assert [r.getMessage() for r in caplog.records] == [
        "event=config.platform_secret_missing variable=MEMORY_SERVICE_TOKEN "
        "effect='platform endpoints answer 401'",
        "event=config.platform_secret_missing variable=MEMORY_WEBHOOK_SECRET "
        "effect='the completion webhook answers 503'",
    ]


def test_an_app_not_started_by_serve_keeps_platform_endpoints_closed(make_app, tmp_path):
    """Secrets `serve` generated into the instance folder open nothing for gunicorn, workers or
    tests: with the variables unset, the platform endpoints stay closed (SPEC §2)."""
    app = make_app(MEMORY_SERVICE_TOKEN=None, MEMORY_WEBHOOK_SECRET=None)
    app.instance_path = str(tmp_path)
    generated, created = credentials.load_or_create(str(tmp_path))
    assert created
    client = app.test_client()
    context = client.get("/api/v1/internal/memory/context?userId=1", headers={
        "Authorization": f"Bearer {generated['MEMORY_SERVICE_TOKEN']}"})
    assert context.status_code == 401
    status, _ = post_webhook(client, event(), secret=generated["MEMORY_WEBHOOK_SECRET"])
    assert status == 503


def test_mysql_sessions_read_committed(app):
    assert app.config["SQLALCHEMY_ENGINE_OPTIONS"]["isolation_level"] == "READ COMMITTED"


def test_health_probe_answers_without_dependencies(make_app):
    app = make_app(SQLALCHEMY_DATABASE_URI="mysql+pymysql://root@127.0.0.1:1/none")
    response = app.test_client().get("/healthz")
    assert (response.status_code, response.get_json()) == (200, {"status": "ok"})


@pytest.mark.parametrize(("variable", "value"), [("MEMORY_LLM_TIMEOUT_S", "soon"),
                                                 ("MEMORY_RETRY_DELAYS_S", "5,thirty"),
                                                 ("MEMORY_SESSION_HOURS", "-1")])
def test_a_malformed_variable_stops_the_start_naming_it(monkeypatch, variable, value):
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigurationError, match=variable):
        create_app()


def test_comma_lists_are_read_and_an_empty_bot_list_means_none(monkeypatch, tmp_path):
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path}/z.db")
    monkeypatch.setenv("MEMORY_RETRY_DELAYS_S", "1, 2,3")
    monkeypatch.setenv("MEMORY_BOT_PROJECT_KEYS", "")
    app = create_app()
    assert app.config["MEMORY_RETRY_DELAYS_S"] == (1, 2, 3)
    assert app.config["MEMORY_BOT_PROJECT_KEYS"] == ()
