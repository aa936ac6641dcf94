"""Configuration read from the environment (SPEC §2; `.env` is loaded by `wsgi.py`), as a typed
pydantic-settings model: a malformed value stops the start with the variable's name."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, field_validator
from pydantic_core import PydanticUseDefault
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from app import redis_connection

log = logging.getLogger(__name__)

DEV_SECRET_KEY = "dev-only-secret-key-do-not-use-in-production"
DEFAULT_RETRY_DELAYS_S = (5, 30, 120)
# A login lasts a working day; a copied cookie dies with its login session in any case.
DEFAULT_SESSION_HOURS = 12

CommaList = Annotated[tuple[str, ...], NoDecode]


# What each unset platform secret leaves closed (SPEC §2).
PLATFORM_SECRETS = {
    "MEMORY_SERVICE_TOKEN": "platform endpoints answer 401",
    "MEMORY_WEBHOOK_SECRET": "the completion webhook answers 503",
}


class Environment(BaseSettings):
    """The variables of SPEC §2 and README's configuration table. An empty value is an unset
    one, except for MEMORY_BOT_PROJECT_KEYS, where it means "no bot keys"."""

    model_config = SettingsConfigDict(case_sensitive=True, extra="ignore")

    DATABASE_URL: str | None = None
    REDIS_URL: str | None = None
    # Redis behind Sentinel: `host:port,host:port` of the Sentinels and the master's name.
    REDIS_SENTINELS: str | None = None
    REDIS_SENTINEL_MASTER: str | None = None
    SECRET_KEY: str | None = None
    MEMORY_WEBHOOK_SECRET: str | None = None
    MEMORY_SERVICE_TOKEN: str | None = None
    MEMORY_LLM_TIMEOUT_S: float = Field(30, gt=0)
    MEMORY_BOT_PROJECT_KEYS: CommaList = ("weixin-bot",)
    # Backoff between attempts of a job whose LLM call failed transiently (connection, 429,
    # 5xx); one retry per entry, then the job fails.
    MEMORY_RETRY_DELAYS_S: Annotated[tuple[int, ...], NoDecode] = DEFAULT_RETRY_DELAYS_S
    MEMORY_SESSION_HOURS: float = Field(DEFAULT_SESSION_HOURS, gt=0)
    FLASK_ENV: str | None = None
    APP_ENV: str | None = None

    @field_validator("*", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: Any, info: Any) -> Any:
        if value == "" and info.field_name != "MEMORY_BOT_PROJECT_KEYS":
            raise PydanticUseDefault()
        return value

    @field_validator("MEMORY_BOT_PROJECT_KEYS", "MEMORY_RETRY_DELAYS_S", mode="before")
    @classmethod
    def _comma_list(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(part.strip() for part in value.split(",") if part.strip())
        return value

    @property
    def production(self) -> bool:
        return "production" in (self.FLASK_ENV, self.APP_ENV)


def is_production() -> bool:
    """FLASK_ENV or APP_ENV says production."""
    return Environment().production


def _default_database_url(instance_path: str) -> str:
    Path(instance_path).mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{Path(instance_path) / 'memory.sqlite3'}"


def _redis_url(env: Environment) -> str | None:
    """REDIS_URL, or with REDIS_SENTINELS the `redis+sentinel://` URL every Redis client of the
    service understands (`app.redis_connection`); REDIS_URL then gives only the database number
    and password."""
    if env.REDIS_SENTINELS:
        return redis_connection.sentinel_url(env.REDIS_SENTINELS, env.REDIS_SENTINEL_MASTER,
                                             env.REDIS_URL)
    return env.REDIS_URL


def from_environment(instance_path: str) -> dict[str, Any]:
    """Build the Flask config mapping from environment variables."""
    env = Environment()
    if env.SECRET_KEY is None and env.production:
        raise RuntimeError("SECRET_KEY must be set when FLASK_ENV/APP_ENV is production")
    return {
        "SECRET_KEY": env.SECRET_KEY or DEV_SECRET_KEY,
        "SQLALCHEMY_DATABASE_URI": env.DATABASE_URL or _default_database_url(instance_path),
        "REDIS_URL": _redis_url(env),
        "MEMORY_WEBHOOK_SECRET": env.MEMORY_WEBHOOK_SECRET,
        "MEMORY_SERVICE_TOKEN": env.MEMORY_SERVICE_TOKEN,
        "MEMORY_LLM_TIMEOUT_S": env.MEMORY_LLM_TIMEOUT_S,
        "MEMORY_BOT_PROJECT_KEYS": env.MEMORY_BOT_PROJECT_KEYS,
        "MEMORY_RETRY_DELAYS_S": env.MEMORY_RETRY_DELAYS_S,
        # OPENAI_BASE_URL / OPENAI_API_KEY are read by the LLM client at call time, so a
        # model's api_key_env can name any variable of the process environment.
        # How long a login lasts, server-side and in the cookie.
        "PERMANENT_SESSION_LIFETIME": timedelta(hours=env.MEMORY_SESSION_HOURS),
        "SESSION_COOKIE_HTTPONLY": True,
        "SESSION_COOKIE_SAMESITE": "Lax",
        "SESSION_COOKIE_SECURE": env.production,
        # Large enough for a long assistant answer in a webhook, small enough to refuse abuse.
        "MAX_CONTENT_LENGTH": 1024 * 1024,
        "SQLALCHEMY_ENGINE_OPTIONS": {"pool_pre_ping": True, "pool_recycle": 1800},
    }


def log_missing_platform_secrets(config: Mapping[str, Any]) -> None:
    """In production, say at startup which platform secrets are unset and what that closes:
    a deployment that forgot one otherwise only learns it from the platform's 401s and 503s."""
    if not is_production():
        return
    for name, effect in PLATFORM_SECRETS.items():
        if not config.get(name):
            log.warning("event=config.platform_secret_missing variable=%s effect=%r", name,
                        effect)
