"""Provenance: the journal of every change to a memory, and who read a user's memories.

`memory_event` holds one row per change (SPEC §8 Provenance), written in the same transaction as
the change; a memory's rows go when the memory is deleted. `memory_access_log` holds one row per
audit read of a user's memories (SPEC §8 Audit transparency).

Revision ID: 0004_provenance
Revises: 0003_consolidation
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0004_provenance"
down_revision = "0003_consolidation"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Timestamp = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")
MYSQL_TABLE = {"mysql_engine": "InnoDB", "mysql_charset": "utf8mb4",
               "mysql_collate": "utf8mb4_unicode_ci"}


def upgrade():
    op.create_table(
        "memory_event",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("memory_id", sa.BigInteger, nullable=False),
        sa.Column("user_id", sa.BigInteger, nullable=False),
        sa.Column("type", sa.String(16), nullable=False,
                  comment="CREATED/EDITED/TOUCHED/UPDATED/DISMISSED/RESTORED/DEMOTED/"
                          "CONSOLIDATED"),
        sa.Column("actor", sa.String(16), nullable=False,
                  comment="USER/EXTRACTION/CONSOLIDATION"),
        sa.Column("session_id", sa.BigInteger, nullable=True,
                  comment="the platform session that caused it; NULL for the user's own"),
        sa.Column("before", sa.Text, nullable=True,
                  comment="content before; CONSOLIDATED: JSON array of the merged contents"),
        sa.Column("after", sa.Text, nullable=True, comment="content after"),
        sa.Column("at", Timestamp, nullable=False),
        sa.Index("idx_memory_event_memory", "memory_id", "id"),
        **MYSQL_TABLE,
    )
    op.create_table(
        "memory_access_log",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("viewer_id", sa.BigInteger, nullable=False),
        sa.Column("subject_user_id", sa.BigInteger, nullable=False),
        sa.Column("what", sa.String(16), nullable=False, comment="LIST/HISTORY"),
        sa.Column("memory_id", sa.BigInteger, nullable=True, comment="HISTORY: the memory"),
        sa.Column("at", Timestamp, nullable=False),
        sa.Index("idx_memory_access_subject", "subject_user_id", "id"),
        **MYSQL_TABLE,
    )


def downgrade():
    op.drop_table("memory_access_log")
    op.drop_table("memory_event")
