"""Accounts: passwords, personal tokens, grants, and users first seen through the platform."""

from __future__ import annotations

import functools
import hashlib
import secrets
from datetime import timedelta

import sqlalchemy as sa
from werkzeug.security import check_password_hash, generate_password_hash

from app.auth import sessions
from app.auth.models import ApiToken, Permission, User
from app.database.conflicts import retry_conflicts
from app.db_types import upsert, utcnow
from app.extensions import db
from app.unit_of_work import UnitOfWork

TOKEN_PREFIX = "mem_"
# What `users tokens` shows of a token: its first 8 characters (SPEC §8).
SHOWN_PREFIX = 8
# SPEC §9 Accounts: wherever a password is set (CLI, any page), at least this many characters.
PASSWORD_MIN_LENGTH = 8
# A token's last use is written at most this often: a token calling the API in a loop must not
# turn every read into a write.
LAST_USED_PRECISION = timedelta(minutes=1)


class AccountError(ValueError):
    """An operator asked for something that cannot be done (CLI and admin use)."""


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def login_account(username: str) -> User | None:
    """The account a login form's name is for, as the database matches names: its collation
    (utf8mb4_unicode_ci) ignores case, width and accents, so `ｃａｒｏｌ` and `càrol` are carol.
    The login throttle counts against this account, whatever spelling was typed."""
    return User.by_username(username)


def authenticate_password(user: User | None, password: str) -> User | None:
    """`user` (from `login_account`), if the password is theirs and the account is not
    disabled."""
    if user is None or not user.password_hash or not user.is_active:
        # Spend the same time as a real check so usernames cannot be probed by timing.
        check_password_hash(_dummy_hash(), password)
        return None
    return user if check_password_hash(user.password_hash, password) else None


@retry_conflicts
def user_for_token(token: str) -> User | None:
    """The owner of a personal token that was not revoked, has not expired and whose account is
    not disabled; its last use is noted (to the minute)."""
    if not token.startswith(TOKEN_PREFIX):
        return None
    now = utcnow()
    row = ApiToken.live(hash_token(token), now)
    if row is None:
        return None
    if row.last_used_at is None or now - row.last_used_at >= LAST_USED_PRECISION:
        with UnitOfWork() as uow:
            row.last_used_at = now
            uow.commit()
    return db.session.get(User, row.user_id)


@retry_conflicts
def issue_token(user: User, days: int | None = None) -> str:
    """A new personal token, valid for `days` (None: until revoked); only its hash and its
    first characters are kept, so this is the one time it is seen."""
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    expires_at = utcnow() + timedelta(days=days) if days is not None else None
    with UnitOfWork() as uow:
        db.session.add(ApiToken(user_id=user.id, token_hash=hash_token(token),
                                prefix=token[:SHOWN_PREFIX], expires_at=expires_at))
        uow.commit()
    return token


def tokens(username: str) -> list[ApiToken]:
    return ApiToken.of_user(_named(username).id)


@retry_conflicts
def revoke_token(username: str, token_id: int) -> None:
    """Delete one of the user's tokens: the next call with it is 401."""
    user = _named(username)
    with UnitOfWork() as uow:
        deleted = db.session.execute(sa.delete(ApiToken).where(
            ApiToken.id == token_id, ApiToken.user_id == user.id)).rowcount
        if not deleted:
            raise AccountError(f"{username!r} has no token {token_id}")
        uow.commit()


def check_password_rule(password: str) -> None:
    """A password has at least PASSWORD_MIN_LENGTH characters (an empty one too is refused: a
    token-only account is asked for explicitly, never made by an empty password)."""
    if len(password) < PASSWORD_MIN_LENGTH:
        raise AccountError(f"a password must have at least {PASSWORD_MIN_LENGTH} characters")


@retry_conflicts
def set_password(username: str, password: str) -> int:
    """A new password; every login of the user ends. Returns how many ended."""
    user = _named(username)
    check_password_rule(password)
    with UnitOfWork() as uow:
        user.password_hash = generate_password_hash(password)
        ended = sessions.end_all(user.id)
        uow.commit()
    return ended


@retry_conflicts
def set_disabled(username: str, disabled: bool) -> int:
    """Disable (every login ends, tokens stop working) or enable an account. Returns how many
    logins ended."""
    user = _named(username)
    with UnitOfWork() as uow:
        user.disabled_at = utcnow() if disabled else None
        ended = sessions.end_all(user.id) if disabled else 0
        uow.commit()
    return ended


def _named(username: str) -> User:
    user = User.by_username(username)
    if user is None:
        raise AccountError(f"no user {username!r}")
    return user


@retry_conflicts
def ensure_user(user_id: int) -> User:
    """The user with this platform id, created on the spot when first seen."""
    user = db.session.get(User, user_id)
    if user is not None:
        return user
    with UnitOfWork() as uow:
        # Does nothing when another request created it first.
        db.session.execute(upsert(User.__table__, db.session.get_bind().dialect.name,
                                  {"id": user_id, "is_admin": False, "created_at": utcnow()}))
        uow.commit()
    return db.session.get(User, user_id)


@retry_conflicts
def create_user(username: str, *, user_id: int | None = None, password: str | None = None,
                admin: bool = False) -> User:
    """A named account. With `user_id` of a user first seen through the platform, names it.
    `password` None makes a token-only account (no login page); any password must pass the
    rule."""
    if password is not None:
        check_password_rule(password)
    username = username.strip()
    if not username or len(username) > 64:
        raise AccountError("username must be 1 to 64 characters")
    if User.by_username(username) is not None:
        raise AccountError(f"user {username!r} already exists")
    user = db.session.get(User, user_id) if user_id is not None else None
    if user is not None and user.username is not None:
        raise AccountError(f"user id {user_id} already belongs to {user.username!r}")
    with UnitOfWork() as uow:
        if user is None:
            # Never AUTO_INCREMENT: a platform id at the top of the range would exhaust it.
            user = User(id=user_id if user_id is not None else User.next_local_id())
            db.session.add(user)
        user.username = username
        user.is_admin = admin
        user.password_hash = generate_password_hash(password) if password is not None else None
        uow.commit()
    return user


@retry_conflicts
def grant(username: str, code: str) -> User:
    user = _named(username)
    permission = Permission.by_code(code)
    if permission is None:
        codes = ", ".join(db.session.scalars(sa.select(Permission.code).order_by(Permission.code)))
        raise AccountError(f"no permission {code!r} (known: {codes})")
    if permission not in user.permissions:
        with UnitOfWork() as uow:
            user.permissions.append(permission)
            uow.commit()
    return user


@functools.cache
def _dummy_hash() -> str:
    return generate_password_hash(secrets.token_hex(8))
