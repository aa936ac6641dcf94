"""What the platform's two fast paths (`fast_context`, `fast_webhook`) share: a WSGI layer in
front of Flask's that answers one route's plainly valid requests itself — with the route's own
code and bytes — and passes every other request on untouched (issue 12)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import ClassVar
from wsgiref.types import StartResponse, WSGIApplication, WSGIEnvironment

from flask import Flask

from app.envelope import DEPENDENCY_ERRORS

CONTENT_TYPE = ("Content-Type", "application/json")


def route_path(app: Flask, endpoint: str) -> str:
    """The path `endpoint` is registered under: a fast path answers exactly that one."""
    (rule,) = app.url_map.iter_rules(endpoint)
    if rule.arguments:
        raise RuntimeError(f"{endpoint} has path variables; a fast path expects none")
    return rule.rule


class FastPath(ABC):
    """`method` on the route of `endpoint` answered by `answer`, when it gives a body; anything
    else (and whatever `answer` declines) goes to `fallback` — Flask's `wsgi_app`, or another
    fast path in front of it.

    A dependency failure `answer` meets (database or Redis down) is handed to the route in the
    environ under `failed` — a dotted key, which a WSGI server never sets from a request
    (headers arrive as HTTP_*) — and the route raises it after its own checks: the same 503 and
    log line, without a second try. Any other exception is a bug of the fast path: logged, and
    the route answers."""

    name: ClassVar[str]  # in the log line of a bug
    failed: ClassVar[str]
    endpoint: ClassVar[str]
    method: ClassVar[str]
    status: ClassVar[str]  # as werkzeug spells it, so both paths send the same status line
    headers: ClassVar[tuple[tuple[str, str], ...]]  # besides Content-Type and -Length

    def __init__(self, app: Flask, fallback: WSGIApplication) -> None:
        self.app = app
        self.fallback = fallback
        self.path = route_path(app, self.endpoint)

    @classmethod
    def install(cls, app: Flask) -> None:
        """In front of `app`'s WSGI callable (after its routes are registered)."""
        app.wsgi_app = cls(app, app.wsgi_app)  # type: ignore[method-assign]

    def __call__(self, environ: WSGIEnvironment,
                 start_response: StartResponse) -> Iterable[bytes]:
        if (environ.get("PATH_INFO") == self.path
                and environ.get("REQUEST_METHOD") == self.method):
            body = self._answered(environ)
            if body is not None:
                start_response(self.status, [CONTENT_TYPE, ("Content-Length", str(len(body))),
                                             *self.headers])
                return [body]
        return self.fallback(environ, start_response)

    def _answered(self, environ: WSGIEnvironment) -> bytes | None:
        try:
            return self.answer(environ)
        except DEPENDENCY_ERRORS as error:
            environ[self.failed] = error
        except Exception:
            self.app.logger.exception("%s fast path failed; answered by Flask", self.name)
        return None

    @abstractmethod
    def answer(self, environ: WSGIEnvironment) -> bytes | None:
        """The body of the route's success answer, or None: let the fallback answer."""
