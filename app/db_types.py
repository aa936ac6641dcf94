"""Column types shared by every model, so MySQL and SQLite get the same shapes."""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from sqlalchemy.dialects import mysql

# BIGINT ids on MySQL; SQLite only auto-increments an INTEGER PRIMARY KEY.
BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

# Sub-second timestamps so "newest first" has no ties within one second (SPEC §3).
Timestamp = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")



def project_key_type(max_length: int = 128) -> sa.types.TypeEngine:
    """Project keys compare byte-for-byte on MySQL too ('Mao' and 'mao' are two projects)."""
    return sa.String(max_length).with_variant(
        mysql.VARCHAR(max_length, charset="utf8mb4", collation="utf8mb4_bin"), "mysql", "mariadb"
    )


ProjectKey = project_key_type()


def utcnow() -> datetime:
    """Naive UTC with microseconds: what every timestamp column stores."""
    return datetime.now(UTC).replace(tzinfo=None)


def iso(value: datetime | None) -> str | None:
    """ISO-8601 UTC with a Z suffix, as the API shows timestamps."""
    return None if value is None else value.isoformat(timespec="microseconds") + "Z"
