"""D15 consolidation: the per-user cooldown, and what a consolidation job reports.

`memory_consolidation_state` keeps when each user's last consolidation started, so the 24 h
cooldown holds across workers and restarts; it is claimed with a conditional UPDATE (or the
first INSERT), never read-then-written. `memory_job_outcome` gains the group a consolidation
job worked on and its counts; they stay NULL on extraction outcomes.

Revision ID: 0003_consolidation
Revises: 0002_extraction_pipeline
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0003_consolidation"
down_revision = "0002_extraction_pipeline"
branch_labels = None
depends_on = None

Timestamp = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")
MYSQL_TABLE = {"mysql_engine": "InnoDB", "mysql_charset": "utf8mb4",
               "mysql_collate": "utf8mb4_unicode_ci"}
OUTCOME_COUNTS = ("rows_in", "rows_out", "merges", "drops")


def project_key() -> sa.types.TypeEngine:
    return sa.String(128).with_variant(
        mysql.VARCHAR(128, charset="utf8mb4", collation="utf8mb4_bin"), "mysql", "mariadb"
    )


def upgrade():
    op.create_table(
        "memory_consolidation_state",
        sa.Column("user_id", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("last_started_at", Timestamp, nullable=False,
                  comment="when the user's last consolidation was claimed (24 h cooldown)"),
        **MYSQL_TABLE,
    )
    op.add_column("memory_job_outcome",
                  sa.Column("scope", sa.String(16), nullable=True,
                            comment="consolidation: the group's scope"))
    op.add_column("memory_job_outcome",
                  sa.Column("project_key", project_key(), nullable=True,
                            comment="consolidation: the project group's key"))
    for name in OUTCOME_COUNTS:
        op.add_column("memory_job_outcome", sa.Column(name, sa.Integer, nullable=True))


def downgrade():
    # Batch mode: SQLite rebuilds the table where it cannot drop a column in place.
    with op.batch_alter_table("memory_job_outcome") as outcome:
        for name in reversed(("scope", "project_key", *OUTCOME_COUNTS)):
            outcome.drop_column(name)
    op.drop_table("memory_consolidation_state")
