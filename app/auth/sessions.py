"""Browser logins: Flask-Login over server-side login sessions, and CSRF with Flask-WTF.

Flask-Login's alternative-id pattern: the cookie (Flask's signed session) carries the id of a
`login_session` row, not the user id, and Flask-Login loads the user through that row. Ending the
row — logout, a password change, an account disabled — ends the login wherever the cookie was
copied to, at once (SPEC §8 Login and sessions); the row also carries an absolute expiry.

Neither library gets its app-wide hooks: Flask-Login's `after_request` only refreshes remember-me
cookies, which the service never sets, and CSRFProtect's `before_request` would look at every
unsafe request, the completion webhook included. The platform's two hot paths must not pay for a
browser's login, so the user is loaded only where a cookie is the credential, and `csrf_check()`
is called exactly there (`app.auth.identity`, `app.pages`, the login and logout forms).
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Any

import sqlalchemy as sa
from flask import Flask, current_app, request, session
from flask.sessions import SecureCookieSessionInterface
from flask_login import current_user, login_user, logout_user
from flask_wtf.csrf import CSRFError, generate_csrf

from app.auth.models import LoginSession, User
from app.database.conflicts import retry_conflicts
from app.db_types import utcnow
from app.extensions import csrf, db, login_manager
from app.security_headers import PUBLIC_ENDPOINTS
from app.unit_of_work import UnitOfWork

# The username of the cookie's login, kept in the (signed) cookie session: when the login expires
# the login page offers it again, so only the password is typed. Logout empties the session.
LOGIN_NAME = "login_name"


def _hash(session_id: str) -> str:
    return hashlib.sha256(session_id.encode("utf-8")).hexdigest()


class CookieSessions(SecureCookieSessionInterface):
    """Flask's signed-cookie sessions, less the cookie on static files: a permanent session is
    re-sent on every response (SESSION_REFRESH_EACH_REQUEST), and a script or icon that any
    cache may keep must not carry one person's session cookie with it."""

    def should_set_cookie(self, app: Flask, session: Any) -> bool:
        if request.endpoint in PUBLIC_ENDPOINTS:
            return False
        return super().should_set_cookie(app, session)


def init_app(app: Flask) -> None:
    app.session_interface = CookieSessions()
    # What LoginManager.init_app does, less its after_request hook (see the module docstring).
    # The attribute Flask-Login looks the manager up by; Flask does not declare it.
    app.login_manager = login_manager  # type: ignore[attr-defined]
    login_manager.user_loader(load)
    # What CSRFProtect.init_app would set, less its before_request hook; the token's lifetime
    # is the login's own (WTF_CSRF_TIME_LIMIT None), and the header is the one htmx sends.
    app.extensions["csrf"] = csrf
    for name, value in (("WTF_CSRF_ENABLED", True), ("WTF_CSRF_CHECK_DEFAULT", False),
                        ("WTF_CSRF_METHODS", {"POST", "PUT", "PATCH", "DELETE"}),
                        ("WTF_CSRF_FIELD_NAME", "csrf_token"),
                        ("WTF_CSRF_HEADERS", ["X-CSRF-Token"]),
                        ("WTF_CSRF_TIME_LIMIT", None), ("WTF_CSRF_SSL_STRICT", True)):
        app.config.setdefault(name, value)


def logged_in_user() -> User | None:
    """The user of the browser session, while its login session lasts (one query)."""
    # `current_user` is a proxy of the loaded User (untyped by Flask-Login).
    return current_user if current_user.is_authenticated else None  # type: ignore[return-value]


def expired_login_name() -> str:
    """The username of the login this browser had, once it has expired ("" if none)."""
    return str(session.get(LOGIN_NAME, ""))


def csrf_token() -> str:
    """This session's CSRF token, for the pages' meta tag, hx-headers and forms."""
    return generate_csrf()


def csrf_valid() -> bool:
    """Whether an unsafe request carries this session's CSRF token (header or form field)."""
    try:
        csrf.protect()
    except CSRFError:
        return False
    return True


def load(session_id: str) -> User | None:
    """Flask-Login's user loader: the user of a login session that has not ended or expired,
    and whose account is not disabled."""
    user = db.session.scalar(
        sa.select(User).join(LoginSession, LoginSession.user_id == User.id)
        .where(LoginSession.id_hash == _hash(session_id), LoginSession.expires_at > utcnow(),
               User.disabled_at.is_(None)))
    if user is not None:
        user.login_session_id = session_id
    return user


@retry_conflicts
def start(user: User) -> None:
    """Log `user` in: a new login session, in a fresh cookie session, so a CSRF token (or
    anything else) planted before the login is useless after it."""
    session_id = secrets.token_urlsafe(32)
    now = utcnow()
    with UnitOfWork() as uow:
        # Expired logins of the user go as a new one starts: the table never grows unbounded.
        db.session.execute(sa.delete(LoginSession).where(LoginSession.user_id == user.id,
                                                         LoginSession.expires_at <= now))
        db.session.add(LoginSession(id_hash=_hash(session_id), user_id=user.id, created_at=now,
                                    expires_at=now + current_app.permanent_session_lifetime))
        uow.commit()
    session.clear()
    session.permanent = True
    session[LOGIN_NAME] = user.username or ""
    user.login_session_id = session_id
    login_user(user)


@retry_conflicts
def end() -> None:
    """Log out: the login session ends server-side, the cookie session is emptied."""
    user = logged_in_user()
    if user is not None and user.login_session_id is not None:
        with UnitOfWork() as uow:
            db.session.execute(sa.delete(LoginSession).where(
                LoginSession.id_hash == _hash(user.login_session_id)))
            uow.commit()
    logout_user()
    session.clear()


def end_all(user_id: int) -> int:
    """End every login of a user (password changed, account disabled); how many ended. The
    caller's unit of work commits."""
    result = db.session.execute(sa.delete(LoginSession).where(LoginSession.user_id == user_id))
    return result.rowcount or 0
