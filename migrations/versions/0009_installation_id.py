"""The installation id: made once here, the Redis namespace of every key and queue of this
installation unless MEMORY_REDIS_NAMESPACE says otherwise (SPEC §11 "Installations sharing a
Redis never meet").

Revision ID: 0009_installation_id
Revises: 0008_outcome_stale
Create Date: 2026-12-04
"""

import secrets

import sqlalchemy as sa
from alembic import op

revision = "0009_installation_id"
down_revision = "0008_outcome_stale"
branch_labels = None
depends_on = None

SETTING = sa.table("system_setting", sa.column("setting_key", sa.String),
                   sa.column("value", sa.Text), sa.column("category", sa.String),
                   sa.column("description", sa.String), sa.column("editable", sa.Boolean))


def upgrade():
    op.bulk_insert(SETTING, [{
        "setting_key": "installation.id", "value": secrets.token_hex(6),
        "category": "installation",
        "description": "this installation's id: the Redis namespace of its keys and queues",
        "editable": False}])


def downgrade():
    op.execute(SETTING.delete().where(SETTING.c.setting_key == "installation.id"))
