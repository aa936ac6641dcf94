"""`memory_item.version`: the row's version, raised by one on every change of its content,
status, scope or project key (SPEC §11 "No lost updates"); a touch leaves it.

The API's ETag/If-Match and the job's version-checked touch and update compare it. The server
default 1 keeps rows inserted by hand (or by an older release still running during the
upgrade) valid.

Revision ID: 0007_memory_version
Revises: 0006_user_memory_lock_seq
Create Date: 2026-12-04
"""

import sqlalchemy as sa
from alembic import op

revision = "0007_memory_version"
down_revision = "0006_user_memory_lock_seq"
branch_labels = None
depends_on = None


def upgrade():
    op.add_column("memory_item", sa.Column("version", sa.Integer(), nullable=False,
                                           server_default="1"))


def downgrade():
    with op.batch_alter_table("memory_item") as batch_op:
        batch_op.drop_column("version")
