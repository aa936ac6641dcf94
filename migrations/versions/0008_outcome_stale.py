"""`memory_job_outcome.stale`: touches and updates a job did not apply because the row had
changed since the model was shown it (SPEC §11 "What the model proposed applies to what it
saw").

Revision ID: 0008_outcome_stale
Revises: 0007_memory_version
Create Date: 2026-12-04
"""

import sqlalchemy as sa
from alembic import op

revision = "0008_outcome_stale"
down_revision = "0007_memory_version"
branch_labels = None
depends_on = None


def upgrade():
    op.add_column("memory_job_outcome", sa.Column(
        "stale", sa.Integer(), nullable=False, server_default="0",
        comment="touches/updates not applied: the row changed since the model saw it"))


def downgrade():
    with op.batch_alter_table("memory_job_outcome") as batch_op:
        batch_op.drop_column("stale")
