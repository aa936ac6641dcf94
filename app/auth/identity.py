"""Who is calling: a browser session, a personal token, or the platform's service token.

Decorators for the three audiences (SPEC §4): user endpoints accept all three (the service
token must name the user in X-User-Id); admin endpoints accept a session or a personal token of a
user holding the grant; platform endpoints accept only the service token.
"""

from __future__ import annotations

import functools
import hmac
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, ParamSpec, TypeVar

from flask import current_app, g, request

from app import wire
from app.auth import sessions
from app.auth.models import User
from app.auth.service import ensure_user, user_for_token
from app.envelope import ApiError, ErrorCode
from app.extensions import db

P = ParamSpec("P")
R = TypeVar("R")

Method = Literal["session", "token", "service"]
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


@dataclass(frozen=True)
class Caller:
    user: User
    method: Method


def bearer_token(header: str) -> str | None:
    """The token of an `Authorization: Bearer <token>` header value, else None. Also read by the
    context read's endpoint (`app.platform.api.ContextRead`), which has no request object."""
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def _bearer_token() -> str | None:
    return bearer_token(request.headers.get("Authorization", ""))


def is_service_token(token: str | None) -> bool:
    expected = current_app.config.get("MEMORY_SERVICE_TOKEN")
    if not expected or not token:
        return False
    return hmac.compare_digest(token.encode("utf-8"), expected.encode("utf-8"))


def service_token_refused() -> ApiError:
    """The 401 of a platform endpoint; when this server has no service token at all, it says
    so and how to get one (`flask run` starts without the secrets `serve` generates)."""
    if current_app.config.get("MEMORY_SERVICE_TOKEN"):
        return ApiError(ErrorCode.UNAUTHORIZED, "service token required")
    how = ("set it" if current_app.config.get("PRODUCTION") else
           "start the service with `flask --app wsgi serve`, which generates one (`flask run` "
           "does not), or set it")
    return ApiError(ErrorCode.UNAUTHORIZED, "service token required, and MEMORY_SERVICE_TOKEN "
                                            f"is unset on this server: {how}")


def acting_user(user_id: int) -> User:
    """The user the service token acts for. Only a write creates one first seen here (SPEC
    §3): a read of someone unknown is a read of a user with nothing yet."""
    if request.method in SAFE_METHODS:
        return db.session.get(User, user_id) or User(id=user_id, is_admin=False)
    return ensure_user(user_id)


def resolve_caller(*, allow_service: bool) -> Caller:
    """Authenticate the request or raise 401 (1001)."""
    token = _bearer_token()
    if request.headers.get("Authorization") is not None:
        # An Authorization header is the caller's choice of method: never fall back to a cookie.
        if token is None:
            raise ApiError(ErrorCode.UNAUTHORIZED, "malformed Authorization header")
        if is_service_token(token):
            if not allow_service:
                raise ApiError(ErrorCode.FORBIDDEN,
                               "the service token cannot be used on admin endpoints")
            if request.headers.get("X-User-Id") is None:
                raise ApiError(ErrorCode.UNAUTHORIZED,
                               "the service token acts for a user: send X-User-Id")
            user_id = wire.user_id(request.headers.get("X-User-Id"), "X-User-Id")
            return Caller(acting_user(user_id), "service")
        user = user_for_token(token)
        if user is None:
            raise ApiError(ErrorCode.UNAUTHORIZED, "invalid, expired or revoked token")
        return Caller(user, "token")
    user = sessions.logged_in_user()
    if user is None:
        raise ApiError(ErrorCode.UNAUTHORIZED, "login required")
    # Only a cookie is an ambient credential, so only here is a CSRF token asked for.
    if request.method not in SAFE_METHODS and not sessions.csrf_valid():
        raise ApiError(ErrorCode.FORBIDDEN, "missing or invalid CSRF token")
    return Caller(user, "session")


def user_api(view: Callable[P, R]) -> Callable[P, R]:
    """User endpoints: session (+CSRF), personal token, or service token + X-User-Id."""
    @functools.wraps(view)
    def wrapped(*args: P.args, **kwargs: P.kwargs) -> R:
        g.caller = resolve_caller(allow_service=True)
        return view(*args, **kwargs)
    return wrapped


def admin_api(permission: str | None = None) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Admin endpoints: is_admin, or (when `permission` is given) a user holding that grant."""
    def decorator(view: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(view)
        def wrapped(*args: P.args, **kwargs: P.kwargs) -> R:
            caller = resolve_caller(allow_service=False)
            allowed = (caller.user.has_permission(permission) if permission
                       else caller.user.is_admin)
            if not allowed:
                needed = f"the {permission} permission" if permission else "an admin"
                raise ApiError(ErrorCode.FORBIDDEN, f"this endpoint needs {needed}")
            g.caller = caller
            return view(*args, **kwargs)
        return wrapped
    return decorator


def current_user_id() -> int:
    return g.caller.user.id
