"""Users, permissions and personal API tokens."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, aliased, mapped_column

from app.db_types import BigId, Timestamp, utcnow
from app.extensions import Model, db
from app.keys import ID_MAX

user_permission = sa.Table(
    "user_permission",
    db.metadata,
    sa.Column("user_id", sa.BigInteger, sa.ForeignKey("user.id", ondelete="CASCADE"),
              primary_key=True),
    sa.Column("permission_id", sa.Integer, sa.ForeignKey("permission.id", ondelete="CASCADE"),
              primary_key=True),
)


class Permission(Model):
    __tablename__ = "permission"

    id: Mapped[int] = mapped_column(sa.Integer, primary_key=True)
    name: Mapped[str] = mapped_column(sa.String(64))
    code: Mapped[str] = mapped_column(sa.String(64), unique=True)
    description: Mapped[str | None] = mapped_column(sa.String(255))

    @classmethod
    def by_code(cls, code: str) -> Permission | None:
        return db.session.scalar(sa.select(cls).where(cls.code == code))


class User(Model):
    """A person of the platform; `id` is the platform's own user id.

    Also Flask-Login's user, with the alternative-id pattern: `get_id()` is the id of the login
    session it was loaded through (`app.auth.sessions`), never the user id, so ending that
    session ends the cookie's login.
    """

    __tablename__ = "user"

    # The id of the login session this instance was loaded through (None otherwise); a plain
    # attribute, not a column.
    login_session_id = None

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    # Users first seen through the platform have no username until an operator names them.
    username: Mapped[str | None] = mapped_column(sa.String(64), unique=True)
    password_hash: Mapped[str | None] = mapped_column(sa.String(255))
    is_admin: Mapped[bool] = mapped_column(sa.Boolean, default=False, nullable=False)
    created_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow, nullable=False)
    # Set by `users disable`: no login, no personal token, until `users enable`.
    disabled_at: Mapped[datetime | None] = mapped_column(Timestamp)
    # Moved on by every transaction that may grow the user's ACTIVE memories: the write that
    # locks the user's row (`repository.LOCK_USER`; a plain row lock is not seen by Galera).
    memory_lock_seq: Mapped[int] = mapped_column(sa.BigInteger, server_default="0",
                                                 nullable=False)

    permissions: Mapped[list[Permission]] = db.relationship(
        secondary=user_permission, lazy="selectin"
    )

    # Flask-Login's user protocol.
    is_anonymous = False

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def is_active(self) -> bool:
        return self.disabled_at is None

    def get_id(self) -> str | None:
        return self.login_session_id

    @property
    def display_name(self) -> str:
        return self.username or f"#{self.id}"

    def has_permission(self, code: str) -> bool:
        """Admins hold every permission; others only what they were granted."""
        return self.is_admin or any(p.code == code for p in self.permissions)

    @classmethod
    def by_username(cls, username: str) -> User | None:
        return db.session.scalar(sa.select(cls).where(cls.username == username))

    @classmethod
    def display_names(cls, user_ids: set[int]) -> dict[int, str]:
        """How each of these users is shown, by id (one query)."""
        if not user_ids:
            return {}
        return {user.id: user.display_name
                for user in db.session.scalars(sa.select(cls).where(cls.id.in_(user_ids)))}

    @classmethod
    def next_local_id(cls) -> int:
        """An id for an account made by the CLI: above every id, like AUTO_INCREMENT, but
        never past ID_MAX — once the platform has reported an id at the very top (ids are its
        own), the lowest free id instead, so no reported id exhausts the accounts' id space."""
        top = db.session.scalar(sa.select(sa.func.max(cls.id)))
        if top is None:
            return 1
        if top < ID_MAX:
            return top + 1
        if db.session.get(cls, 1) is None:
            return 1
        taken, after = aliased(cls), aliased(cls)
        return db.session.scalar(
            sa.select(sa.func.min(taken.id + 1))
            .outerjoin(after, after.id == taken.id + 1)
            .where(after.id.is_(None), taken.id < ID_MAX))

    @classmethod
    def search(cls, query: str, limit: int = 20) -> list[User]:
        """Users whose name contains `query`, or whose id is `query`."""
        condition = cls.username.contains(query, autoescape=True)
        # ASCII only: str.isdigit() also accepts digits like '²' that int() cannot read.
        if query.isascii() and query.isdigit():
            condition = condition | (cls.id == int(query))
        return list(db.session.scalars(sa.select(cls).where(condition).order_by(cls.id)
                                       .limit(limit)))


# The webhook's statement (raw write pool): a user first seen there is created on the spot. A
# known user is only looked at (no row lock for the extraction jobs to wait on), and two first
# deliveries of one user cannot collide.
INSERT_PLATFORM_USER = (
    sa.insert(User.__table__)
    .from_select(["id", "is_admin", "created_at"],
                 sa.select(sa.bindparam("id"), sa.false(), sa.bindparam("created_at"))
                 .where(~sa.exists().where(User.id == sa.bindparam("id"))))
    .prefix_with("IGNORE", dialect="mysql").prefix_with("OR IGNORE", dialect="sqlite"))


class ApiToken(Model):
    """A personal API token; only its SHA-256 is stored, and its first 8 characters to tell it
    apart in a listing."""

    __tablename__ = "api_token"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    user_id: Mapped[int] = mapped_column(
        sa.BigInteger, sa.ForeignKey("user.id", ondelete="CASCADE"), index=True, nullable=False
    )
    token_hash: Mapped[str] = mapped_column(sa.String(64), unique=True, nullable=False)
    created_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow, nullable=False)
    # Tokens made before revision 0005 have no prefix; no expiry means it never expires.
    prefix: Mapped[str | None] = mapped_column(sa.String(8))
    expires_at: Mapped[datetime | None] = mapped_column(Timestamp)
    last_used_at: Mapped[datetime | None] = mapped_column(Timestamp)

    @classmethod
    def live(cls, token_hash: str, now: datetime) -> ApiToken | None:
        """The token with this hash, unless it expired or its user is disabled."""
        return db.session.scalar(
            sa.select(cls).join(User, User.id == cls.user_id)
            .where(cls.token_hash == token_hash, User.disabled_at.is_(None),
                   sa.or_(cls.expires_at.is_(None), cls.expires_at > now)))

    @classmethod
    def of_user(cls, user_id: int) -> list[ApiToken]:
        return list(db.session.scalars(sa.select(cls).where(cls.user_id == user_id)
                                       .order_by(cls.id)))


class LoginSession(Model):
    """A browser login, until it ends (logout, password change, account disabled) or
    expires. The cookie carries its id; only the id's SHA-256 is stored."""

    __tablename__ = "login_session"
    __table_args__ = (sa.Index("idx_login_session_user", "user_id"),)

    id_hash: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    user_id: Mapped[int] = mapped_column(
        sa.BigInteger, sa.ForeignKey("user.id", ondelete="CASCADE"), nullable=False
    )
    created_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow, nullable=False)
    expires_at: Mapped[datetime] = mapped_column(Timestamp, nullable=False)
