"""`user.memory_lock_seq`: the per-user lock that guards the 200 cap becomes a write.

`SELECT … FOR UPDATE` locks a row on the server that runs it and nowhere else: on a Galera
cluster two writers on two nodes both hold "the" lock, both count 199 and both insert. An UPDATE
of the user's row takes the same lock on one server and, on Galera, puts the row in the
transaction's write-set, so the second writer to commit fails certification (a deadlock, 1213,
retried) instead of passing the cap. The column is what that UPDATE changes.

Revision ID: 0006_user_memory_lock_seq
Revises: 0005_sessions_and_tokens
Create Date: 2026-12-04
"""

import sqlalchemy as sa
from alembic import op

revision = "0006_user_memory_lock_seq"
down_revision = "0005_sessions_and_tokens"
branch_labels = None
depends_on = None


def upgrade():
    op.add_column("user", sa.Column("memory_lock_seq", sa.BigInteger(), nullable=False,
                                    server_default="0"))


def downgrade():
    op.drop_column("user", "memory_lock_seq")
