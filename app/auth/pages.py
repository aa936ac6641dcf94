"""Login and logout pages (session authentication, SPEC §6 and §8 Login and sessions)."""

from __future__ import annotations

import logging
import math
from urllib.parse import urlsplit

from flask import Blueprint, Response, redirect, render_template, request, url_for

from app.auth import sessions
from app.auth.csrf import csrf_refused
from app.auth.service import authenticate_password, login_account
from app.auth.throttle import account_key, throttle

bp = Blueprint("auth", __name__)
log = logging.getLogger(__name__)


def _safe_next(target: str | None) -> str:
    """Only same-site paths: a login link must not bounce the user to another site."""
    if target:
        parts = urlsplit(target)
        if not parts.scheme and not parts.netloc and target.startswith("/") \
                and not target.startswith("//") and "\\" not in target:
            return target
    return url_for("user_pages.memory_page")


def _throttled(next_url: str | None, username: str, retry_after: int) -> Response:
    minutes = math.ceil(retry_after / 60)
    response = Response(render_template(
        "login.html", next_url=next_url, username=username,
        error=f"登录失败次数过多:为保护账号,请 {minutes} 分钟后再试。"), 429)
    response.headers["Retry-After"] = str(retry_after)
    return response


@bp.route("/login", methods=["GET", "POST"])
def login():
    """The login form; on success a new login session and a redirect to `next`.

    After 5 failed logins for one account within 15 minutes every attempt for it is 429 with
    Retry-After, whatever the password, until the window passes; a good login clears the
    account's count."""
    next_url = request.values.get("next")
    if request.method == "GET":
        # After an expired login the form keeps its username: only the password is typed again.
        expired = request.args.get("expired") == "1"
        return render_template("login.html", next_url=next_url, error=None, expired=expired,
                               username=sessions.expired_login_name() if expired else "")
    # A refused attempt keeps the username: only the password is typed again.
    username = request.form.get("username", "").strip()
    if not sessions.csrf_valid():
        return render_template("login.html", next_url=next_url, username=username,
                               error="登录页面已过期,请重新输入密码再登录。"), 400
    # The peer, or the client N trusted proxies back (ProxyFix, MEMORY_TRUSTED_PROXIES).
    address = request.remote_addr or "-"
    account = login_account(username)
    key = account_key(username, account.id if account is not None else None)
    limits = throttle()
    retry_after = limits.retry_after(key, address)
    if retry_after is not None:
        log.warning("event=login.throttled username=%r address=%s retry_after_s=%d",
                    username[:64], address, retry_after)
        return _throttled(next_url, username, retry_after)
    user = authenticate_password(account, request.form.get("password", ""))
    if user is None:
        limits.failed(key, address)
        # Never the password, and the username quoted: it is whatever the client sent.
        log.warning("event=login.failed username=%r address=%s", username[:64], address)
        return render_template("login.html", next_url=next_url, username=username,
                               error="用户名或密码错误,请重新输入密码。"), 401
    limits.succeeded(key)
    sessions.start(user)
    log.info("event=login.succeeded user=%s address=%s", user.id, address)
    return redirect(_safe_next(next_url))


@bp.post("/logout")
def logout():
    """End the login: its session is revoked server-side, so a copy of the cookie is dead too.
    A POST with the CSRF token, so another site cannot log the user out."""
    if sessions.logged_in_user() is not None:
        if not sessions.csrf_valid():
            return csrf_refused()
        sessions.end()
    return redirect(url_for("auth.login"))


@bp.app_context_processor
def template_globals() -> dict:
    """Every page knows the logged-in user (None when nobody is) and can emit the CSRF token."""
    return {"current_user": sessions.logged_in_user(), "csrf_token": sessions.csrf_token}
