"""`memory_job_outcome.secrets_dropped`: how many of a job's candidates (extraction) or merges
(consolidation) were refused for holding a credential (SPEC §11 "Credentials are never stored").

Revision ID: 0010_outcome_secrets_dropped
Revises: 0009_installation_id
Create Date: 2026-12-04
"""

import sqlalchemy as sa
from alembic import op

revision = "0010_outcome_secrets_dropped"
down_revision = "0009_installation_id"
branch_labels = None
depends_on = None


def upgrade():
    op.add_column("memory_job_outcome", sa.Column("secrets_dropped", sa.Integer(),
                                                  nullable=False, server_default="0"))


def downgrade():
    with op.batch_alter_table("memory_job_outcome") as batch_op:
        batch_op.drop_column("secrets_dropped")
