"""What the HTML blueprints share: page or fragment, login and CSRF, and error answers.

Pages are server-rendered; htmx swaps fragments of them. A URL that can answer both (the memory
page and its list, the audit page and its results) decides by the `HX-Request` header, so every
response of these blueprints varies on it.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from flask import (
    Blueprint,
    Response,
    g,
    make_response,
    redirect,
    render_template,
    request,
    session,
    url_for,
)

from app import messages
from app.auth import sessions
from app.auth.csrf import csrf_refused
from app.auth.identity import SAFE_METHODS
from app.auth.models import User
from app.envelope import ApiError
from app.errors import DomainError
from app.htmx import HX_REQUEST, TOAST_TARGET, error_response, is_htmx  # noqa: F401


def blueprint(name: str, import_name: str, url_prefix: str) -> Blueprint:
    """An HTML blueprint behind a login: CSRF on unsafe methods, responses varying on htmx,
    and the domain's refusals answered as pages answer them."""
    bp = Blueprint(name, import_name, url_prefix=url_prefix)
    bp.before_request(require_login)
    bp.after_request(vary_on_htmx)
    bp.register_error_handler(DomainError, api_error_response)
    bp.register_error_handler(ApiError, api_error_response)
    return bp


def page_or_fragment(page: str, fragment: str, **context: Any) -> str:
    """The fragment alone for htmx, else the full page (which includes the same fragment)."""
    return render_template(fragment if is_htmx() else page, **context)


# Sent by the pages' script with a search fired by a pause in typing (not Enter): its address
# replaces the current history entry, so Back does not walk through half-typed queries.
TYPING = "X-Search-Typing"


def canonical(html: str, url: str) -> Response:
    """A page or fragment whose view lives in the URL: htmx pushes `url`, the view's own
    address (defaults and empty fields left out), not the request's — a search form sends
    every field, empty or not. A new history entry only for a view the person committed to:
    the address shown already (Enter after a pause) or a pause in typing replaces instead."""
    response = make_response(html)
    if is_htmx():
        shown = urlsplit(request.headers.get("HX-Current-URL", ""))
        here = shown.path + (f"?{shown.query}" if shown.query else "")
        replace = here == url or request.headers.get(TYPING) == "true"
        response.headers["HX-Replace-Url" if replace else "HX-Push-Url"] = url
    return response


def vary_on_htmx(response: Response) -> Response:
    """after_request of the HTML blueprints: caches must keep page and fragment apart."""
    response.vary.add(HX_REQUEST)
    return response


def current_user() -> User:
    """The logged-in user of this request (set by `require_login`)."""
    return g.page_user


def _next_url() -> str:
    """Where to come back after login: for htmx, the page the browser shows, not the fragment."""
    if is_htmx() and request.headers.get("HX-Current-URL"):
        parts = urlsplit(request.headers["HX-Current-URL"])
        return parts.path + (f"?{parts.query}" if parts.query else "")
    return request.full_path.rstrip("?")


def login_redirect() -> Response:
    """To the login page; htmx follows `HX-Redirect` with a full navigation. A request from a
    page that was logged in (htmx, or a cookie that named a login) says the login expired, so the
    login page can say so rather than look like a first visit."""
    # "_user_id": where Flask-Login keeps the login the cookie named.
    expired = is_htmx() or "_user_id" in session
    target = url_for("auth.login", next=_next_url(), expired=1 if expired else None)
    if is_htmx():
        response = make_response("", 401)
        response.headers["HX-Redirect"] = target
        return response
    return redirect(target)


def require_login() -> Response | None:
    """before_request of the HTML blueprints: a logged-in user, and CSRF on unsafe methods."""
    user = sessions.logged_in_user()
    if user is None:
        return login_redirect()
    if request.method not in SAFE_METHODS and not sessions.csrf_valid():
        return csrf_refused()
    g.page_user = user
    return None


def as_api_error(exc: ApiError | DomainError) -> ApiError:
    return exc if isinstance(exc, ApiError) else ApiError.from_domain(exc)


def describe(exc: ApiError | DomainError) -> str:
    """A refusal as the pages show it: one Chinese sentence that says what to do."""
    return messages.sentence(exc)


def api_error_response(exc: ApiError | DomainError) -> Response:
    """Error handler of the HTML blueprints for what the domain refused."""
    return error_response(as_api_error(exc).http_status, messages.heading(exc), describe(exc))
