"""System settings and LLM model registry: the admin's side of D10."""

from __future__ import annotations

import ipaddress
import re
import socket
from typing import Any
from urllib.parse import urlsplit

import sqlalchemy as sa

from app.database.conflicts import retry_conflicts
from app.errors import InvalidInput, NotEditable, UnknownModel
from app.extensions import db
from app.system.models import EXTRACTION_MODEL_KEY, LlmModel, SystemSetting
from app.unit_of_work import UnitOfWork

MODEL_SETTING_KEYS = frozenset({EXTRACTION_MODEL_KEY})
# The longest model id a setting may name, in digits (a BIGINT has 19; no registry gets there).
MODEL_ID_DIGITS = 18
# The service's own secrets and connection strings: never a model's key. A model's api_key_env
# is sent as a bearer token to its base URL, so naming one of these would hand it to whoever
# that URL points at.
SERVICE_SECRETS = frozenset({"SECRET_KEY", "MEMORY_SERVICE_TOKEN", "MEMORY_WEBHOOK_SECRET",
                             "DATABASE_URL", "REDIS_URL", "TEST_DATABASE_URL", "TEST_REDIS_URL"})
SERVICE_PREFIXES = ("MEMORY_", "FLASK_", "WTF_", "SQLALCHEMY_")
# SPEC §9: a model's key variable is named like one (OPENAI_API_KEY, DEEPSEEK_API_KEY), so no
# other variable of the worker's environment (AWS_SECRET_ACCESS_KEY, HOME…) can be named.
_API_KEY_ENV = re.compile(r"[A-Z][A-Z0-9_]*_API_KEY")
# Cloud metadata services that are not link-local: AWS's IPv6 endpoint, Alibaba Cloud's; and
# the names Google Cloud gives its own.
METADATA_ADDRESSES = frozenset({ipaddress.ip_address("fd00:ec2::254"),
                                ipaddress.ip_address("100.100.100.200")})
METADATA_HOSTS = frozenset({"metadata.google.internal", "metadata.goog"})
# IPv6 prefixes that carry an IPv4 address in their last 32 bits: IPv4-compatible (::/96) and
# NAT64's well-known prefix.
_IPV4_CARRIERS = (ipaddress.ip_network("::/96"), ipaddress.ip_network("64:ff9b::/96"),
                  ipaddress.ip_network("64:ff9b:1::/48"))


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
    if value == "":
        return ""
    # An id is ASCII digits and nothing else (SPEC §9), as `/api/openapi.json` says.
    if not (value.isascii() and value.isdigit()) or len(value) > MODEL_ID_DIGITS \
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
    """A variable that may hold a model's key: `[A-Z][A-Z0-9_]*_API_KEY`, not one of the
    service's own."""
    if not _API_KEY_ENV.fullmatch(name):
        raise ValueError(f"--api-key-env must be a name like OPENAI_API_KEY "
                         f"([A-Z][A-Z0-9_]*_API_KEY), not {name!r}")
    if name.upper() in SERVICE_SECRETS or name.upper().startswith(SERVICE_PREFIXES):
        raise ValueError(f"{name} is the service's own configuration; a model's key must live "
                         "in a variable of its own (for example OPENAI_API_KEY)")
    return name


def _host_address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address a URL's host names, read as the resolver reads it: besides dotted quads,
    the C library takes `2852039166`, `0xa9fea9fe`, `0251.0376.0251.0376` and `169.254.43518`
    as IPv4 addresses (`inet_aton`), and the HTTP client connects to what it takes. None: a
    name to resolve."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except (OSError, ValueError):
        return None


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one stands for: IPv4-mapped (`::ffff:a.b.c.d`), 6to4,
    IPv4-compatible or NAT64."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    # :: and ::1 (IPv6's own loopback) are not IPv4-compatible addresses.
    if int(address) > 1 and any(address in net for net in _IPV4_CARRIERS):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def check_base_url(url: str) -> str:
    """An http(s) URL with a host that is no link-local or metadata address, in any spelling:
    integer, octal and hex IPv4 forms, and IPv6 forms that carry an IPv4 address (a mapped
    `[::ffff:169.254.169.254]` or `[::ffff:127.0.0.1]` is refused; write the IPv4 address
    itself). Cloud metadata lives there and answers whoever asks with credentials."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"--base-url must be an http(s) URL, not {url!r}")
    host = parts.hostname.rstrip(".")
    if host in METADATA_HOSTS:
        raise ValueError(f"--base-url must not point at a cloud metadata service ({host})")
    address = _host_address(host)
    if address is None:
        return url
    if isinstance(address, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(address)
        if embedded is not None:
            raise ValueError(f"--base-url must not use an IPv6 form of an IPv4 address "
                             f"({address} is {embedded}); write the IPv4 address")
    if address.is_link_local or address in METADATA_ADDRESSES:
        raise ValueError(f"--base-url must not point at a link-local or metadata address "
                         f"({address})")
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
