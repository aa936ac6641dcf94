"""Configuration read from the environment (SPEC §2); `.env` is loaded by `wsgi.py`."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from typing import Any

DEV_SECRET_KEY = "dev-only-secret-key-do-not-use-in-production"
DEFAULT_RETRY_DELAYS_S = (5, 30, 120)
# A login lasts a working day; a copied cookie dies with its login session in any case.
DEFAULT_SESSION_HOURS = 12


def _is_production() -> bool:
    return "production" in (os.environ.get("FLASK_ENV", ""), os.environ.get("APP_ENV", ""))


def _default_database_url(instance_path: str) -> str:
    Path(instance_path).mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{Path(instance_path) / 'memory.sqlite3'}"


def _retry_delays(raw: str | None) -> tuple[int, ...]:
    parts = [part.strip() for part in (raw or "").split(",") if part.strip()]
    if not parts:
        return DEFAULT_RETRY_DELAYS_S
    if not all(part.isascii() and part.isdigit() for part in parts):
        raise RuntimeError("MEMORY_RETRY_DELAYS_S must be a comma list of whole seconds")
    return tuple(int(part) for part in parts)


def from_environment(instance_path: str) -> dict[str, Any]:
    """Build the Flask config mapping from environment variables."""
    secret_key = os.environ.get("SECRET_KEY") or DEV_SECRET_KEY
    if secret_key == DEV_SECRET_KEY and _is_production():
        raise RuntimeError("SECRET_KEY must be set when FLASK_ENV/APP_ENV is production")
    bot_keys = os.environ.get("MEMORY_BOT_PROJECT_KEYS", "weixin-bot")
    return {
        "SECRET_KEY": secret_key,
        "SQLALCHEMY_DATABASE_URI": os.environ.get("DATABASE_URL")
        or _default_database_url(instance_path),
        "REDIS_URL": os.environ.get("REDIS_URL") or None,
        "MEMORY_WEBHOOK_SECRET": os.environ.get("MEMORY_WEBHOOK_SECRET") or None,
        "MEMORY_SERVICE_TOKEN": os.environ.get("MEMORY_SERVICE_TOKEN") or None,
        "MEMORY_LLM_TIMEOUT_S": float(os.environ.get("MEMORY_LLM_TIMEOUT_S") or 30),
        "MEMORY_BOT_PROJECT_KEYS": tuple(k.strip() for k in bot_keys.split(",") if k.strip()),
        # Backoff between attempts of a job whose LLM call failed transiently (connection, 429,
        # 5xx); one retry per entry, then the job fails.
        "MEMORY_RETRY_DELAYS_S": _retry_delays(os.environ.get("MEMORY_RETRY_DELAYS_S")),
        # OPENAI_BASE_URL / OPENAI_API_KEY are read by the LLM client at call time, so a
        # model's api_key_env can name any variable of the process environment.
        # How long a login lasts, server-side and in the cookie.
        "PERMANENT_SESSION_LIFETIME": timedelta(
            hours=float(os.environ.get("MEMORY_SESSION_HOURS") or DEFAULT_SESSION_HOURS)),
        "SESSION_COOKIE_HTTPONLY": True,
        "SESSION_COOKIE_SAMESITE": "Lax",
        "SESSION_COOKIE_SECURE": _is_production(),
        # Large enough for a long assistant answer in a webhook, small enough to refuse abuse.
        "MAX_CONTENT_LENGTH": 1024 * 1024,
        "SQLALCHEMY_ENGINE_OPTIONS": {"pool_pre_ping": True, "pool_recycle": 1800},
    }
