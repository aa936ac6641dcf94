"""System settings and LLM model registry: the admin's side of D10."""

from __future__ import annotations

import ipaddress
import re
from typing import Any
from urllib.parse import urlsplit

import sqlalchemy as sa

from app.database import retry_conflicts
from app.errors import InvalidInput, NotEditable, UnknownModel
from app.extensions import db
from app.system.models import EXTRACTION_MODEL_KEY, LlmModel, SystemSetting
from app.unit_of_work import UnitOfWork

MODEL_SETTING_KEYS = frozenset({EXTRACTION_MODEL_KEY})
# The service's own secrets and connection strings: never a model's key. A model's api_key_env
# is sent as a bearer token to its base URL, so naming one of these would hand it to whoever
# that URL points at.
SERVICE_SECRETS = frozenset({"SECRET_KEY", "MEMORY_SERVICE_TOKEN", "MEMORY_WEBHOOK_SECRET",
                             "DATABASE_URL", "REDIS_URL", "TEST_DATABASE_URL", "TEST_REDIS_URL"})
SERVICE_PREFIXES = ("MEMORY_", "FLASK_", "WTF_", "SQLALCHEMY_")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def list_settings() -> list[SystemSetting]:
    return list(db.session.scalars(
        sa.select(SystemSetting).order_by(SystemSetting.category, SystemSetting.setting_key)
    ))


def _model_id_value(value: Any) -> str:
    """'' (use the default model) or the id of a registered model, else 3003."""
    if isinstance(value, bool):
        raise InvalidInput("setting_value_type", "value must be a string")
    if isinstance(value, int):
        value = str(value)
    if not isinstance(value, str):
        raise InvalidInput("setting_value_type", "value must be a string")
    value = value.strip()
    if value == "":
        return ""
    if not (value.isascii() and value.isdigit()) or len(value) > 18 \
            or db.session.get(LlmModel, int(value)) is None:
        raise UnknownModel("model_not_found", f"no model with id {value!r}")
    return str(int(value))


@retry_conflicts
def put_setting(key: str, value: Any) -> SystemSetting:
    setting = db.session.get(SystemSetting, key)
    if setting is None:
        raise InvalidInput("setting_unknown", f"unknown setting {key!r}")
    if not setting.editable:
        raise NotEditable("setting_not_editable", f"setting {key!r} is not editable")
    if key in MODEL_SETTING_KEYS:
        value = _model_id_value(value)
    elif not isinstance(value, str):
        raise InvalidInput("setting_value_type", "value must be a string")
    with UnitOfWork() as uow:
        setting.value = value
        uow.commit()
    return setting


def list_models() -> list[LlmModel]:
    return LlmModel.all_ordered()


def check_api_key_env(name: str) -> str:
    """A variable that may hold a model's key: a plain name, not one of the service's own."""
    if not _ENV_NAME.fullmatch(name):
        raise ValueError(f"--api-key-env must name an environment variable, not {name!r}")
    if name.upper() in SERVICE_SECRETS or name.upper().startswith(SERVICE_PREFIXES):
        raise ValueError(f"{name} is the service's own configuration; a model's key must live "
                         "in a variable of its own (for example OPENAI_API_KEY)")
    return name


def check_base_url(url: str) -> str:
    """An http(s) URL with a host, not a link-local address (cloud metadata lives there)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"--base-url must be an http(s) URL, not {url!r}")
    try:
        address = ipaddress.ip_address(parts.hostname)
    except ValueError:
        return url
    if address.is_link_local:
        raise ValueError(f"--base-url must not point at a link-local address ({address})")
    return url


@retry_conflicts
def add_model(name: str, model: str, *, base_url: str | None = None,
              api_key_env: str | None = None, default: bool = False) -> LlmModel:
    """Register a model; `default` makes it the only default."""
    if api_key_env:
        check_api_key_env(api_key_env)
    if base_url:
        check_base_url(base_url)
    if db.session.scalar(sa.select(LlmModel.id).where(LlmModel.name == name)) is not None:
        raise ValueError(f"model {name!r} already exists")
    with UnitOfWork() as uow:
        if default:
            db.session.execute(sa.update(LlmModel).values(is_default=False))
        row = LlmModel(name=name, model=model, base_url=base_url or None,
                       api_key_env=api_key_env or None, is_default=default)
        db.session.add(row)
        uow.commit()
    return row
