"""Configuration read from the environment (SPEC §2; `.env` is loaded by `wsgi.py`), as a typed
pydantic-settings model: a malformed value stops the start with one line naming the variable
(`ConfigurationError`)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError, field_validator
from pydantic_core import PydanticUseDefault
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from app import redis_connection
from app.misconfigured import ConfigurationError

log = logging.getLogger(__name__)

DEV_SECRET_KEY = "dev-only-secret-key-do-not-use-in-production"
DEFAULT_RETRY_DELAYS_S = (5, 30, 120)
# A login lasts a working day; a copied cookie dies with its login session in any case.
DEFAULT_SESSION_HOURS = 12

CommaList = Annotated[tuple[str, ...], NoDecode]
# The schema's Alembic scripts (the factory's Flask-Migrate, start-up's checks).
MIGRATIONS_DIR = str(Path(__file__).resolve().parent.parent / "migrations")
DATABASE_URL_EXAMPLE = "mysql+pymysql://USER:PASSWORD@HOST:3306/DATABASE?charset=utf8mb4"
REDIS_SCHEMES = ("redis", "rediss", "unix", "redis+sentinel")


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
    # The prefix of this installation's Redis keys and queues; default: its installation id.
    MEMORY_REDIS_NAMESPACE: str | None = Field(None, pattern=r"^[A-Za-z0-9_-]{1,32}$")
    SECRET_KEY: str | None = None
    MEMORY_WEBHOOK_SECRET: str | None = None
    MEMORY_SERVICE_TOKEN: str | None = None
    MEMORY_LLM_TIMEOUT_S: float = Field(30, gt=0)
    MEMORY_BOT_PROJECT_KEYS: CommaList = ("weixin-bot",)
    # Backoff between attempts of a job whose LLM call failed transiently (connection, 429,
    # 5xx); one retry per entry, then the job fails.
    MEMORY_RETRY_DELAYS_S: Annotated[tuple[int, ...], NoDecode] = DEFAULT_RETRY_DELAYS_S
    MEMORY_SESSION_HOURS: float = Field(DEFAULT_SESSION_HOURS, gt=0)
    # How many proxies in front of the service append to X-Forwarded-For/-Proto/-Host (0: the
    # peer is the client). Trusting more than there are lets any client forge its address.
    MEMORY_TRUSTED_PROXIES: int = Field(0, ge=0, le=10)
    FLASK_ENV: str | None = None
    # Unset is development; a value that is neither (`prod`) is refused rather than silently
    # taken for development (SPEC §11 "Start-up tells").
    APP_ENV: Literal["production", "development"] | None = None

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


def read_environment() -> Environment:
    """The environment, checked: a malformed variable is a `ConfigurationError` naming it."""
    try:
        return Environment()
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc'])}={error['input']!r}: "
            f"{error['msg']}" for error in exc.errors())
        raise ConfigurationError(problems) from None


def is_production() -> bool:
    """FLASK_ENV or APP_ENV says production."""
    return read_environment().production


def check_database_url(url: str) -> str:
    """`url` when SQLAlchemy can use it: parsed, its dialect known and its driver installed.
    The message never quotes the URL, which may hold a password."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise ConfigurationError(f"DATABASE_URL is not a database URL; expected e.g. "
                                 f"{DATABASE_URL_EXAMPLE}") from None
    try:
        parsed.get_dialect().import_dbapi()
    except ArgumentError:
        raise ConfigurationError(f"DATABASE_URL names an unknown database {parsed.drivername!r};"
                                 f" expected e.g. {DATABASE_URL_EXAMPLE}") from None
    except ImportError as exc:
        raise ConfigurationError(f"DATABASE_URL needs the driver {exc.name or parsed.drivername!r},"
                                 f" which is not installed; expected e.g. "
                                 f"{DATABASE_URL_EXAMPLE}") from None
    return url


def check_redis_url(url: str | None) -> str | None:
    if url is not None and url.partition("://")[0] not in REDIS_SCHEMES:
        raise ConfigurationError("REDIS_URL must start with redis://, rediss://, unix:// or "
                                 "redis+sentinel://, "
                                 "e.g. redis://127.0.0.1:6379/0")
    return url


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
    env = read_environment()
    if env.SECRET_KEY is None and env.production:
        raise ConfigurationError("SECRET_KEY must be set when FLASK_ENV/APP_ENV is production "
                                 "(a long random value, e.g. from: python -c 'import secrets; "
                                 "print(secrets.token_hex(32))')")
    return {
        "SECRET_KEY": env.SECRET_KEY or DEV_SECRET_KEY,
        "SQLALCHEMY_DATABASE_URI": check_database_url(
            env.DATABASE_URL or _default_database_url(instance_path)),
        "REDIS_URL": check_redis_url(_redis_url(env)),
        "MEMORY_REDIS_NAMESPACE": env.MEMORY_REDIS_NAMESPACE,
        "MEMORY_WEBHOOK_SECRET": env.MEMORY_WEBHOOK_SECRET,
        "MEMORY_SERVICE_TOKEN": env.MEMORY_SERVICE_TOKEN,
        "MEMORY_LLM_TIMEOUT_S": env.MEMORY_LLM_TIMEOUT_S,
        "MEMORY_BOT_PROJECT_KEYS": env.MEMORY_BOT_PROJECT_KEYS,
        "MEMORY_RETRY_DELAYS_S": env.MEMORY_RETRY_DELAYS_S,
        "MEMORY_TRUSTED_PROXIES": env.MEMORY_TRUSTED_PROXIES,
        # Production answers HTML over https with Strict-Transport-Security.
        "PRODUCTION": env.production,
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
