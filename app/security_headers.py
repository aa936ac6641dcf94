"""Security headers on every response (SPEC §8 Headers).

Every response: no MIME sniffing, and no Referer sent to other sites. HTML: a Content-Security-
Policy that runs only the service's own script files (the pages have no inline script, no inline
event handler and nothing htmx would eval) and lets no site frame a page. A response to a request
that carried credentials (or that starts a session) is `no-store`, so neither a shared cache nor
the browser's history keeps a copy of what one person saw, and Back fetches the page anew. This
runs on the hottest endpoint too (the platform's context read), so it only compares and assigns
strings.
"""

from __future__ import annotations

from flask import Flask, Response, request, session

CONTENT_SECURITY_POLICY = "; ".join([
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self'",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
])
# On every response. The hot paths' endpoints (`app.platform.hot_path`), which answer outside
# Flask, send these two and PRIVATE from here.
EVERY_RESPONSE: tuple[tuple[str, str], ...] = (
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "same-origin"),
)
PRIVATE: tuple[str, str] = ("Cache-Control", "no-store")
# Production pages reached over https tell the browser to use nothing else for a year (SPEC §9);
# not sent over http, where a browser ignores it anyway, nor outside production (a developer's
# localhost must not be pinned to https).
STRICT_TRANSPORT_SECURITY = ("Strict-Transport-Security", "max-age=31536000")
# Static files (the icon among them) are the same for everyone, so a request for one that happens
# to carry the session cookie may still be cached.
PUBLIC_ENDPOINTS = frozenset({"static", "site.favicon"})


def init_app(app: Flask) -> None:
    """Set the headers on every response of `app`."""
    session_cookie = app.config["SESSION_COOKIE_NAME"]
    production = bool(app.config.get("PRODUCTION"))

    @app.after_request
    def security_headers(response: Response) -> Response:
        headers = response.headers
        for name, value in EVERY_RESPONSE:
            headers[name] = value
        if response.mimetype == "text/html":
            headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
            # For browsers that predate frame-ancestors.
            headers["X-Frame-Options"] = "DENY"
            if production and request.is_secure:
                headers[STRICT_TRANSPORT_SECURITY[0]] = STRICT_TRANSPORT_SECURITY[1]
        # `session.modified`: this response starts a session (the login form's CSRF token).
        if ("Authorization" in request.headers or session_cookie in request.cookies
                or session.modified) and request.endpoint not in PUBLIC_ENDPOINTS:
            headers[PRIVATE[0]] = PRIVATE[1]
        return response
