"""Accounts: passwords, personal tokens, grants, and users first seen through the platform."""

from __future__ import annotations

import functools
import hashlib
import secrets

import sqlalchemy as sa
from werkzeug.security import check_password_hash, generate_password_hash

from app.auth.models import ApiToken, Permission, User
from app.db_types import upsert, utcnow
from app.extensions import db
from app.unit_of_work import UnitOfWork

TOKEN_PREFIX = "mem_"


class AccountError(ValueError):
    """An operator asked for something that cannot be done (CLI and admin use)."""


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def authenticate_password(username: str, password: str) -> User | None:
    user = User.by_username(username)
    if user is None or not user.password_hash:
        # Spend the same time as a real check so usernames cannot be probed by timing.
        check_password_hash(_dummy_hash(), password)
        return None
    return user if check_password_hash(user.password_hash, password) else None


def user_id_for_token(token: str) -> int | None:
    if not token.startswith(TOKEN_PREFIX):
        return None
    return ApiToken.user_id_for_hash(hash_token(token))


def issue_token(user: User) -> str:
    """A new personal token; only its hash is kept, so this is the one time it is seen."""
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    with UnitOfWork() as uow:
        db.session.add(ApiToken(user_id=user.id, token_hash=hash_token(token)))
        uow.commit()
    return token


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


def create_user(username: str, *, user_id: int | None = None, password: str | None = None,
                admin: bool = False) -> User:
    """A named account. With `user_id` of a user first seen through the platform, names it."""
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
            user = User(id=user_id) if user_id is not None else User()
            db.session.add(user)
        user.username = username
        user.is_admin = admin
        user.password_hash = generate_password_hash(password) if password else None
        uow.commit()
    return user


def grant(username: str, code: str) -> User:
    user = User.by_username(username)
    if user is None:
        raise AccountError(f"no user {username!r}")
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
