"""Extraction pipeline: received webhook events (idempotency) and one outcome row per job.

Revision ID: 0002_extraction_pipeline
Revises: 0001_foundation
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0002_extraction_pipeline"
down_revision = "0001_foundation"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Timestamp = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")
MYSQL_TABLE = {"mysql_engine": "InnoDB", "mysql_charset": "utf8mb4",
               "mysql_collate": "utf8mb4_unicode_ci"}


def event_id() -> sa.types.TypeEngine:
    """Opaque ids compare byte for byte: 'a' and 'A' are two events."""
    return sa.String(128).with_variant(
        mysql.VARCHAR(128, charset="utf8mb4", collation="utf8mb4_bin"), "mysql", "mariadb"
    )


def upgrade():
    op.create_table(
        "webhook_event",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("event_id", event_id(), nullable=False),
        sa.Column("session_id", sa.BigInteger, nullable=False),
        sa.Column("user_id", sa.BigInteger, nullable=False),
        sa.Column("phase", sa.String(32), nullable=False),
        sa.Column("reason", sa.String(32), nullable=False,
                  comment="the webhook's answer: enqueued or why not"),
        sa.Column("received_at", Timestamp, nullable=False),
        sa.UniqueConstraint("event_id", name="uk_webhook_event_id"),
        sa.Index("idx_webhook_event_reason", "reason"),
        **MYSQL_TABLE,
    )
    op.create_table(
        "memory_job_outcome",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("kind", sa.String(32), nullable=False, comment="extraction, ..."),
        sa.Column("job_id", sa.String(64), nullable=False),
        sa.Column("event_id", event_id(), nullable=True),
        sa.Column("user_id", sa.BigInteger, nullable=False),
        sa.Column("session_id", sa.BigInteger, nullable=True),
        sa.Column("status", sa.String(16), nullable=False,
                  comment="succeeded/skipped/abandoned/failed"),
        sa.Column("reason", sa.String(64), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("model", sa.String(128), nullable=True),
        sa.Column("prompt_chars", sa.Integer, nullable=True),
        sa.Column("prompt_tokens", sa.Integer, nullable=True),
        sa.Column("completion_tokens", sa.Integer, nullable=True),
        sa.Column("total_tokens", sa.Integer, nullable=True),
        sa.Column("inserted", sa.Integer, nullable=False),
        sa.Column("touched", sa.Integer, nullable=False),
        sa.Column("updated", sa.Integer, nullable=False),
        sa.Column("dropped", sa.Integer, nullable=False),
        sa.Column("demoted", sa.Integer, nullable=False),
        sa.Column("duration_ms", sa.Integer, nullable=False),
        sa.Column("created_at", Timestamp, nullable=False),
        sa.UniqueConstraint("job_id", name="uk_memory_job_outcome_job"),
        sa.Index("idx_memory_job_outcome_user", "user_id", "status"),
        sa.Index("idx_memory_job_outcome_status", "status"),
        sa.Index("idx_memory_job_outcome_metrics", "kind", "status", "reason", "duration_ms"),
        **MYSQL_TABLE,
    )


def downgrade():
    op.drop_table("memory_job_outcome")
    op.drop_table("webhook_event")
