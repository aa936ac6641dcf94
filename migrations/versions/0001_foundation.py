"""Foundation: users, permissions, tokens, memories, preferences, settings, models, sessions.

memory_item follows seed §5.1 (V129) with DATETIME(6) timestamps and a trailing updated_at on
each index so list and injection reads are index-ordered; seeds `memory:read` (V129) and
`memory.extractionModelId` (V130).

Revision ID: 0001_foundation
Revises:
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0001_foundation"
down_revision = None
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Timestamp = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")
MYSQL_TABLE = {"mysql_engine": "InnoDB", "mysql_charset": "utf8mb4",
               "mysql_collate": "utf8mb4_unicode_ci"}
# SQLite would otherwise hand a deleted row's id to the next insert; a client holding the old
# id must never reach someone else's new row.
NEVER_REUSED_IDS = {"sqlite_autoincrement": True}


def project_key(length: int) -> sa.types.TypeEngine:
    return sa.String(length).with_variant(
        mysql.VARCHAR(length, charset="utf8mb4", collation="utf8mb4_bin"), "mysql", "mariadb"
    )


def upgrade():
    op.create_table(
        "user",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("username", sa.String(64), nullable=True),
        sa.Column("password_hash", sa.String(255), nullable=True),
        sa.Column("is_admin", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("created_at", Timestamp, nullable=False),
        sa.UniqueConstraint("username", name="uk_user_username"),
        **MYSQL_TABLE, **NEVER_REUSED_IDS,
    )
    permission = op.create_table(
        "permission",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("code", sa.String(64), nullable=False),
        sa.Column("description", sa.String(255), nullable=True),
        sa.UniqueConstraint("code", name="uk_permission_code"),
        **MYSQL_TABLE,
    )
    op.create_table(
        "user_permission",
        sa.Column("user_id", sa.BigInteger,
                  sa.ForeignKey("user.id", ondelete="CASCADE", name="fk_user_permission_user"),
                  primary_key=True),
        sa.Column("permission_id", sa.Integer,
                  sa.ForeignKey("permission.id", ondelete="CASCADE",
                                name="fk_user_permission_permission"),
                  primary_key=True),
        **MYSQL_TABLE,
    )
    op.create_table(
        "api_token",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("user_id", sa.BigInteger,
                  sa.ForeignKey("user.id", ondelete="CASCADE", name="fk_api_token_user"),
                  nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("created_at", Timestamp, nullable=False),
        sa.UniqueConstraint("token_hash", name="uk_api_token_hash"),
        sa.Index("ix_api_token_user_id", "user_id"),
        **MYSQL_TABLE, **NEVER_REUSED_IDS,
    )
    op.create_table(
        "memory_item",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("user_id", sa.BigInteger, nullable=False),
        sa.Column("scope", sa.String(16), nullable=False, comment="USER/PROJECT"),
        sa.Column("project_key", project_key(128), nullable=False, server_default="",
                  comment="PROJECT: the session projectKey; USER: empty string"),
        sa.Column("content", sa.Text, nullable=False),
        sa.Column("source", sa.String(16), nullable=False, server_default="MANUAL",
                  comment="AUTO/MANUAL/CONSOLIDATED"),
        sa.Column("status", sa.String(16), nullable=False, server_default="ACTIVE",
                  comment="ACTIVE/DISMISSED"),
        sa.Column("dedup_hash", sa.CHAR(40), nullable=False,
                  comment="SHA-1(scope|project_key|normalized content)"),
        sa.Column("origin_session_id", sa.BigInteger, nullable=True,
                  comment="session an AUTO row was extracted from"),
        sa.Column("created_at", Timestamp, nullable=False),
        sa.Column("updated_at", Timestamp, nullable=False),
        sa.UniqueConstraint("user_id", "dedup_hash", name="uk_memory_dedup"),
        sa.Index("idx_memory_user", "user_id", "scope", "status", "updated_at"),
        sa.Index("idx_memory_project", "user_id", "project_key", "status", "updated_at"),
        sa.Index("idx_memory_user_status", "user_id", "status", "updated_at"),
        sa.Index("idx_memory_user_updated", "user_id", "updated_at"),
        **MYSQL_TABLE, **NEVER_REUSED_IDS,
    )
    op.create_table(
        "user_memory_preference",
        sa.Column("user_id", sa.BigInteger, primary_key=True, autoincrement=False),
        # D9 (as adjusted): off unless the user turns it on; no row also means off.
        sa.Column("auto_capture_enabled", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("created_at", Timestamp, nullable=False),
        sa.Column("updated_at", Timestamp, nullable=False),
        **MYSQL_TABLE,
    )
    setting = op.create_table(
        "system_setting",
        sa.Column("setting_key", sa.String(128), primary_key=True),
        sa.Column("value", sa.Text, nullable=False),
        sa.Column("category", sa.String(64), nullable=False, server_default=""),
        sa.Column("description", sa.String(255), nullable=False, server_default=""),
        sa.Column("editable", sa.Boolean, nullable=False, server_default=sa.true()),
        **MYSQL_TABLE,
    )
    op.create_table(
        "llm_model",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("model", sa.String(128), nullable=False),
        sa.Column("base_url", sa.String(512), nullable=True),
        sa.Column("api_key_env", sa.String(128), nullable=True),
        sa.Column("is_default", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.UniqueConstraint("name", name="uk_llm_model_name"),
        **MYSQL_TABLE,
    )
    op.create_table(
        "session",
        sa.Column("id", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("user_id", sa.BigInteger, nullable=False),
        sa.Column("project_key", project_key(255), nullable=True),
        sa.Column("workspace", sa.String(512), nullable=True),
        sa.Column("session_type", sa.String(32), nullable=True),
        sa.Column("channel", sa.String(32), nullable=True),
        sa.Column("last_seen_at", Timestamp, nullable=False),
        sa.Index("idx_session_user_project", "user_id", "project_key"),
        **MYSQL_TABLE,
    )

    op.bulk_insert(permission, [{
        "name": "查看用户记忆",
        "code": "memory:read",
        "description": "只读查看指定用户的长期记忆内容(审计用途)",
    }])
    op.bulk_insert(setting, [{
        "setting_key": "memory.extractionModelId",
        "value": "",
        "category": "记忆",
        "description": "记忆自动抽取使用的模型 ID,留空则使用默认模型",
        "editable": True,
    }])


def downgrade():
    for table in ("session", "llm_model", "system_setting", "user_memory_preference",
                  "memory_item", "api_token", "user_permission", "permission", "user"):
        op.drop_table(table)
