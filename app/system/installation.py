"""Which installation this is, and the Redis namespace all of its keys and queues live under
(SPEC §11 "Installations sharing a Redis never meet").

The installation id is made once, by the migration that introduced it (0009), and stored in
`system_setting`: every process on one database reads the same id, whatever spelling of the
database URL it was given. `MEMORY_REDIS_NAMESPACE` overrides the namespace (e.g. to keep the
keys of an installation whose database was restored elsewhere). Both are read once per process
and kept: they do not change while it runs.
"""

from __future__ import annotations

import sqlalchemy as sa
from flask import Flask, current_app

from app.extensions import db
from app.system.models import SystemSetting

INSTALLATION_KEY = "installation.id"
EXTENSION = "memory_installation"


class Installation:
    """This process's knowledge of its installation, read on first use."""

    def __init__(self, configured_namespace: str | None) -> None:
        self.configured_namespace = configured_namespace
        self._id: str | None = None

    @property
    def id(self) -> str:
        if self._id is None:
            # A connection of its own: the caller's unit of work is not this read's.
            with db.engine.connect() as conn:
                found = conn.scalar(sa.select(SystemSetting.value).where(
                    SystemSetting.setting_key == INSTALLATION_KEY))
            if not found:
                raise RuntimeError("no installation id in the database: run flask --app wsgi "
                                   "db upgrade")
            self._id = found
        return self._id

    @property
    def namespace(self) -> str:
        return self.configured_namespace or self.id

    def namespace_of(self) -> str:
        """`namespace`, as a callable for what needs it only later."""
        return self.namespace


def init_app(app: Flask) -> None:
    app.extensions[EXTENSION] = Installation(app.config.get("MEMORY_REDIS_NAMESPACE"))


def installation() -> Installation:
    return current_app.extensions[EXTENSION]
