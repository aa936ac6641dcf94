"""App factory and configuration from the environment (SPEC §2)."""

import pytest
from pydantic import ValidationError

from app import create_app
from app.config import DEV_SECRET_KEY


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
    with pytest.raises(RuntimeError, match="SECRET_KEY"):
        create_app()


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
    with pytest.raises(ValidationError, match=variable):
        create_app()


def test_comma_lists_are_read_and_an_empty_bot_list_means_none(monkeypatch, tmp_path):
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path}/z.db")
    monkeypatch.setenv("MEMORY_RETRY_DELAYS_S", "1, 2,3")
    monkeypatch.setenv("MEMORY_BOT_PROJECT_KEYS", "")
    app = create_app()
    assert app.config["MEMORY_RETRY_DELAYS_S"] == (1, 2, 3)
    assert app.config["MEMORY_BOT_PROJECT_KEYS"] == ()
