"""Revocable logins and personal tokens: server-side login sessions, token prefix, expiry and last
use, disabled accounts.

`login_session` holds one row per browser login (SPEC §8 Login and sessions): the cookie names
it, so deleting the row ends the login wherever the cookie was copied to. Only a hash of its id is
stored. `api_token` learns what `users tokens NAME` lists; tokens made before this revision have
no prefix and never expire. `user.disabled_at` refuses an account's logins and tokens.
`idx_memory_job_outcome_metrics` goes: it covered the GROUP BYs /metrics no longer runs (metrics
are counted as jobs finish), and only cost every outcome insert.

Revision ID: 0005_sessions_and_tokens
Revises: 0004_provenance
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0005_sessions_and_tokens"
down_revision = "0004_provenance"
branch_labels = None
depends_on = None

Timestamp = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")
MYSQL_TABLE = {"mysql_engine": "InnoDB", "mysql_charset": "utf8mb4",
               "mysql_collate": "utf8mb4_unicode_ci"}


def upgrade():
    op.create_table(
        "login_session",
        sa.Column("id_hash", sa.String(64), primary_key=True),
        sa.Column("user_id", sa.BigInteger,
                  sa.ForeignKey("user.id", ondelete="CASCADE", name="fk_login_session_user"),
                  nullable=False),
        sa.Column("created_at", Timestamp, nullable=False),
        sa.Column("expires_at", Timestamp, nullable=False),
        sa.Index("idx_login_session_user", "user_id"),
        **MYSQL_TABLE,
    )
    with op.batch_alter_table("api_token") as batch:
        batch.add_column(sa.Column("prefix", sa.String(8), nullable=True))
        batch.add_column(sa.Column("expires_at", Timestamp, nullable=True))
        batch.add_column(sa.Column("last_used_at", Timestamp, nullable=True))
    with op.batch_alter_table("user") as batch:
        batch.add_column(sa.Column("disabled_at", Timestamp, nullable=True))
    op.drop_index("idx_memory_job_outcome_metrics", table_name="memory_job_outcome")


def downgrade():
    op.create_index("idx_memory_job_outcome_metrics", "memory_job_outcome",
                    ["kind", "status", "reason", "duration_ms"])
    with op.batch_alter_table("user") as batch:
        batch.drop_column("disabled_at")
    with op.batch_alter_table("api_token") as batch:
        batch.drop_column("last_used_at")
        batch.drop_column("expires_at")
        batch.drop_column("prefix")
    op.drop_table("login_session")
