"""Login and logout pages (session authentication)."""

from __future__ import annotations

from urllib.parse import urlsplit

from flask import Blueprint, redirect, render_template, request, session, url_for

from app.auth import csrf
from app.auth.identity import SESSION_USER_KEY
from app.auth.service import authenticate_password

bp = Blueprint("auth", __name__)


def _safe_next(target: str | None) -> str:
    """Only same-site paths: a login link must not bounce the user to another site."""
    if target:
        parts = urlsplit(target)
        if not parts.scheme and not parts.netloc and target.startswith("/") \
                and not target.startswith("//") and "\\" not in target:
            return target
    return url_for("user_pages.memory_page")


@bp.route("/login", methods=["GET", "POST"])
def login():
    """The login form; on success a fresh session and a redirect to `next`."""
    next_url = request.values.get("next")
    if request.method == "GET":
        return render_template("login.html", next_url=next_url, error=None, username="")
    # A refused attempt keeps the username: only the password is typed again.
    username = request.form.get("username", "").strip()
    if not csrf.request_token_valid():
        return render_template("login.html", next_url=next_url, username=username,
                               error="登录页面已过期,请重新输入密码再登录。"), 400
    user = authenticate_password(username, request.form.get("password", ""))
    if user is None:
        return render_template("login.html", next_url=next_url, username=username,
                               error="用户名或密码错误,请重新输入密码。"), 401
    # A new session on login, so a token planted before login is useless afterwards.
    session.clear()
    session[SESSION_USER_KEY] = user.id
    session.permanent = True
    return redirect(_safe_next(next_url))


@bp.route("/logout", methods=["GET", "POST"])
def logout():
    """End the session. A forged logout only costs a login, so no CSRF token is asked."""
    session.clear()
    return redirect(url_for("auth.login"))


@bp.app_context_processor
def template_globals() -> dict:
    """Every page knows the logged-in user and can emit the CSRF token."""
    from app.auth.identity import session_user

    return {"current_user": session_user(), "csrf_token": csrf.token}
