"""What the whole site shares outside any one page: the icon, versioned asset URLs, and Chinese
pages for what the web server itself refuses (no such address, wrong method, a crash).

Under /api/ (and /metrics) errors stay the JSON envelope of `app.envelope`; everywhere else a
person gets a page, or a toast for an htmx request.
"""

from __future__ import annotations

import functools
import hashlib
import os

from flask import Blueprint, Flask, Response, current_app, make_response, url_for
from werkzeug.exceptions import HTTPException

from app import messages, pages
from app.envelope import wants_envelope, with_allow

bp = Blueprint("site", __name__)


@bp.get("/favicon.ico")
def favicon() -> Response:
    """Browsers ask for /favicon.ico by habit; the pages link the SVG icon it answers with."""
    return current_app.send_static_file("favicon.svg")


@functools.cache
def _digest(path: str, mtime_ns: int) -> str:
    with open(path, "rb") as file:
        return hashlib.sha256(file.read()).hexdigest()[:12]


@bp.app_template_global()
def static_url(filename: str) -> str:
    """The URL of a file under static/, versioned by its content: a browser never runs an old
    script with a new page (htmx carries its version in its file name instead)."""
    path = os.path.join(current_app.static_folder or "", filename)
    return url_for("static", filename=filename, v=_digest(path, os.stat(path).st_mtime_ns))


def _unavailable_page(status: int) -> Response:
    """A page for a crash or a dependency that is down. Rendered without the context processors
    (they read the database, which may be what is down)."""
    heading, sentence = messages.http_page(status)
    template = current_app.jinja_env.get_template("unavailable.html")
    return make_response(template.render(heading=heading, sentence=sentence), status)


def init_app(app: Flask) -> None:
    """Register the blueprint, and put pages in front of the envelope's error answers."""
    app.register_blueprint(bp)
    envelope_http_error = app.error_handler_spec[None][None][HTTPException]
    envelope_unexpected = app.error_handler_spec[None][None][Exception]

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException):
        if wants_envelope() or exc.code is None:
            return envelope_http_error(exc)
        heading, sentence = messages.http_page(exc.code)
        return with_allow(pages.error_response(exc.code, heading, sentence), exc)

    @app.errorhandler(Exception)
    def unexpected(exc: Exception):
        # The envelope's handler logs it and picks 500 or 503 (a dependency is down).
        answer = envelope_unexpected(exc)
        if wants_envelope():
            return answer
        return _unavailable_page(answer.status_code)
